//! The process table as /proc shows it: an instance's whole tree (its
//! process group and every descendant, a browser's chromium processes
//! too), and waiting until every one of them is gone, not only the hub's
//! word that it stopped them.

use std::time::{Duration, Instant};

use toolhub::process::ExitWatch;

/// One process, identified by its pid *and* start time (so a reused pid
/// is not mistaken for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgid: i32,
    pub start: u64,
    pub comm: String,
    /// `Z` for a zombie (dead, not yet reaped).
    pub state: char,
}

/// `/proc/<pid>/stat`, parsed; `None` once the process is gone.
pub fn stat(pid: i32) -> Option<Proc> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text[open + 1..close].to_string();
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    // After the name: state(3) ppid(4) pgrp(5) … starttime(22).
    Some(Proc {
        pid,
        state: rest.first()?.chars().next()?,
        ppid: rest.get(1)?.parse().ok()?,
        pgid: rest.get(2)?.parse().ok()?,
        start: rest.get(19)?.parse().ok()?,
        comm,
    })
}

/// Every process now.
pub fn all() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(stat)
        .collect()
}

/// The live processes of `leader`'s tree: its process group and every
/// descendant of any of them (wherever they moved their group to).
pub fn tree(leader: i32) -> Vec<Proc> {
    let every = all();
    let mut mine: Vec<Proc> = every
        .iter()
        .filter(|p| p.pid == leader || p.pgid == leader)
        .cloned()
        .collect();
    loop {
        let more: Vec<Proc> = every
            .iter()
            .filter(|p| !mine.iter().any(|m| m.pid == p.pid))
            .filter(|p| mine.iter().any(|m| m.pid == p.ppid))
            .cloned()
            .collect();
        if more.is_empty() {
            break;
        }
        mine.extend(more);
    }
    mine.retain(|p| p.state != 'Z');
    mine
}

/// Every descendant of `pid` (not `pid` itself).
pub fn descendants(pid: i32) -> Vec<Proc> {
    let every = all();
    let mut mine: Vec<i32> = vec![pid];
    let mut out: Vec<Proc> = Vec::new();
    loop {
        let more: Vec<Proc> = every
            .iter()
            .filter(|p| !mine.contains(&p.pid) && mine.contains(&p.ppid))
            .cloned()
            .collect();
        if more.is_empty() {
            break;
        }
        mine.extend(more.iter().map(|p| p.pid));
        out.extend(more);
    }
    out.retain(|p| p.state != 'Z');
    out
}

/// Is this very process (same pid, same start) still alive? A zombie
/// counts as dead: some sandboxes' PID 1 never reaps orphans.
pub fn alive(p: &Proc) -> bool {
    stat(p.pid).is_some_and(|now| now.start == p.start && now.state != 'Z')
}

/// How many of `procs` are named like a chromium process.
pub fn chromium_count(procs: &[Proc]) -> usize {
    procs.iter().filter(|p| p.comm.contains("chrom")).count()
}

/// Wait (up to `limit`) until none of `procs` is alive, on a pidfd per
/// process (readable when it exits, a zombie too; no polling); fails
/// naming the survivors. Returns how long it took.
pub async fn wait_gone(procs: &[Proc], limit: Duration, what: &str) -> Duration {
    let t0 = Instant::now();
    // A pidfd opened while the very process (same start time) still holds
    // its pid; one that is gone already needs no watch.
    let watches: Vec<ExitWatch> = procs
        .iter()
        .filter_map(|p| ExitWatch::open(p.pid).filter(|_| alive(p)))
        .collect();
    let all_exited = futures::future::join_all(watches.into_iter().map(ExitWatch::exited));
    let _ = tokio::time::timeout(limit, all_exited).await;
    let left: Vec<&Proc> = procs.iter().filter(|p| alive(p)).collect();
    assert!(
        left.is_empty(),
        "{what}: {} of {} processes still alive after {} ms: {left:?}",
        left.len(),
        procs.len(),
        limit.as_millis()
    );
    t0.elapsed()
}
