//! `<stateDir>/children.json`: the process group of every stdio child the
//! hub has running, so that the next start can sweep groups a SIGKILLed hub
//! left behind (`PR_SET_PDEATHSIG` reaches direct children only; their own
//! children survive in the group).
//!
//! Each child gets a random tag in its environment (`TOOLHUB_CHILD_TAG`),
//! which its descendants inherit. A recorded group is killed at start-up only
//! when it provably is ours: its leader is alive with the recorded command
//! line, or a member (the leader included) still carries the recorded tag in
//! its environment. A pid reused by an unrelated process matches neither and
//! is never touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// The environment variable carrying a child's group tag.
pub const TAG_ENV: &str = "TOOLHUB_CHILD_TAG";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
struct Entry {
    server: String,
    pgid: i32,
    cmdline: Vec<String>,
    tag: String,
}

struct Registry {
    path: PathBuf,
    entries: BTreeMap<i32, Entry>,
}

static CURRENT: Mutex<Option<Arc<Mutex<Registry>>>> = Mutex::new(None);

fn current() -> Option<Arc<Mutex<Registry>>> {
    CURRENT.lock().ok().and_then(|g| g.clone())
}

/// A fresh tag for a child about to be spawned.
pub fn new_tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Sweep the groups a previous run left in `state_dir`, then start an empty
/// record for this run. Returns the swept pgids.
pub fn install(state_dir: &Path) -> Vec<i32> {
    let path = state_dir.join("children.json");
    let mut swept = Vec::new();
    if let Ok(text) = std::fs::read_to_string(&path) {
        match serde_json::from_str::<Vec<Entry>>(&text) {
            Ok(old) => {
                for e in old {
                    if let Some(members) = ours(&e) {
                        // SAFETY: plain syscall on a group proven to be ours.
                        unsafe {
                            libc::killpg(e.pgid, libc::SIGKILL);
                        }
                        tracing::warn!(server = %e.server, pgid = e.pgid, members = ?members,
                            "start-up sweep: killed process group {} of server {} left by a previous run", e.pgid, e.server);
                        swept.push(e.pgid);
                    }
                }
            }
            Err(e) => tracing::warn!(path = %path.display(), error = %e,
                "start-up sweep: children.json is unreadable; nothing swept"),
        }
    }
    let reg = Registry {
        path,
        entries: BTreeMap::new(),
    };
    save(&reg);
    if let Ok(mut g) = CURRENT.lock() {
        *g = Some(Arc::new(Mutex::new(reg)));
    }
    swept
}

/// Record a started child (its pid is its pgid: it leads its own group).
/// `argv` is what was spawned (reading `/proc/<pid>/cmdline` right after
/// spawning races with the exec).
pub fn started(server: &str, pgid: i32, tag: &str, argv: Vec<String>) {
    let cmdline = argv;
    update(|r| {
        r.entries.insert(
            pgid,
            Entry {
                server: server.to_string(),
                pgid,
                cmdline,
                tag: tag.to_string(),
            },
        );
    });
}

/// Forget a group once it has been killed.
pub fn stopped(pgid: i32) {
    update(|r| {
        r.entries.remove(&pgid);
    });
}

fn update(f: impl FnOnce(&mut Registry)) {
    let Some(reg) = current() else { return };
    let Ok(mut r) = reg.lock() else { return };
    f(&mut r);
    save(&r);
}

fn save(r: &Registry) {
    let list: Vec<&Entry> = r.entries.values().collect();
    let Ok(text) = serde_json::to_string_pretty(&list) else {
        return;
    };
    let tmp = r.path.with_extension("json.tmp");
    let res = crate::store::private::write(&tmp, text.as_bytes())
        .and_then(|_| std::fs::rename(&tmp, &r.path));
    if let Err(e) = res {
        tracing::warn!(path = %r.path.display(), error = %e,
            "cannot write children.json; a crash would leave this run's process groups unswept");
    }
}

fn read_cmdline(pid: i32) -> Option<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// The live members of group `pgid` (zombies excluded).
fn members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|d| d.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // Fields after the `(comm)`: state ppid pgrp ...
            let mut rest = stat.rsplit(')').next().unwrap_or("").split_whitespace();
            let state = rest.next();
            let pgrp = rest.nth(1).and_then(|p| p.parse::<i32>().ok());
            state != Some("Z") && pgrp == Some(pgid)
        })
        .collect()
}

fn has_tag(pid: i32, tag: &str) -> bool {
    let needle = format!("{TAG_ENV}={tag}");
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()))
        .unwrap_or(false)
}

/// Is the recorded group still ours? Returns its live members if so.
fn ours(e: &Entry) -> Option<Vec<i32>> {
    if e.pgid <= 1 || e.pgid == std::process::id() as i32 {
        return None;
    }
    let members = members(e.pgid);
    if members.is_empty() {
        return None;
    }
    // The leader still runs the recorded command, or some member carries
    // the random tag only our children inherit (the leader may be gone, or
    // may have exec'd through a shebang into another command line).
    let leader_matches = members.contains(&e.pgid)
        && !e.cmdline.is_empty()
        && read_cmdline(e.pgid).as_ref() == Some(&e.cmdline);
    let proven = leader_matches || members.iter().any(|m| has_tag(*m, &e.tag));
    proven.then_some(members)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reused_pid_with_another_command_is_not_ours() {
        let me = std::process::id() as i32;
        // Our own group is never swept, whatever the record says.
        let e = Entry {
            server: "x".into(),
            pgid: me,
            cmdline: read_cmdline(me).unwrap_or_default(),
            tag: "t".into(),
        };
        assert!(ours(&e).is_none());
        let e = Entry {
            server: "x".into(),
            pgid: 1,
            cmdline: vec![],
            tag: "t".into(),
        };
        assert!(ours(&e).is_none());
    }

    #[test]
    fn a_live_group_is_ours_only_with_the_recorded_command_line() {
        use std::os::unix::process::CommandExt;
        let Ok(mut child) = std::process::Command::new("sleep")
            .arg("30")
            .env(TAG_ENV, "tag-of-this-run")
            .process_group(0)
            .spawn()
        else {
            return; // no `sleep` on this machine
        };
        let pid = child.id() as i32;
        let cmdline = vec!["sleep".to_string(), "30".to_string()];
        // Wait out the exec (the cmdline is the parent's until it is done).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while read_cmdline(pid).as_ref() != Some(&cmdline) {
            assert!(std::time::Instant::now() < deadline, "exec never finished");
            std::thread::yield_now();
        }
        let mut e = Entry {
            server: "x".into(),
            pgid: pid,
            cmdline: vec!["node".into(), "server.js".into()],
            tag: "not-its-tag".into(),
        };
        assert!(ours(&e).is_none(), "a reused pid running something else");
        e.tag = "tag-of-this-run".into();
        assert_eq!(ours(&e), Some(vec![pid]), "the inherited tag proves it");
        e.tag = "another-tag".into();
        e.cmdline = cmdline;
        assert_eq!(ours(&e), Some(vec![pid]), "the command line proves it");
        let _ = child.kill();
        let _ = child.wait();
        assert!(ours(&e).is_none(), "a group that is gone");
    }
}
