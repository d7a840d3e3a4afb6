//! Other processes out of a command's sight: a confined command runs in a
//! PID namespace of its own with its own `/proc`, so the hub, its MCP
//! servers and every other program of the machine have no `/proc/<pid>`
//! there: their `environ` (the keys of a server's `env` in config.json)
//! and `cmdline` cannot be read, whatever Landlock lets through (as root,
//! `CAP_PERFMON` reads another process's `environ` past Landlock).
//!
//! Three processes, all made between fork and exec (the `pre_exec` hook of
//! [`super::confine`], so nothing here allocates):
//! - the *waiter*, the child the hub forked (its process group leader):
//!   it clones the *init* into new PID and mount namespaces (and, when the
//!   hub is not root, a user namespace that maps the hub's own uid and gid
//!   to themselves), closes every descriptor, ignores SIGTERM, waits, and
//!   ends the way the shell ended (its exit status, or the same signal);
//! - the *init*, PID 1 of the new namespace: makes the mounts private,
//!   zeroes the copy of the hub's arguments and environment it inherited,
//!   mounts a fresh `/proc`, forks the shell, and reaps until the shell
//!   exits, then hands its status to the waiter through a pipe and exits.
//!   PID 1 exiting ends every process left in the namespace (`setsid`
//!   included); its parent-death signal follows the waiter, whose own
//!   follows the hub;
//! - the *shell* (PID 2) goes on to Landlock and `exec`s `/bin/sh`.
//!
//! The hub's process group, timeout, cancel and parent-death handling work
//! as before: the waiter, the init and the shell share the group, SIGTERM
//! reaches the shell and its children (the init and the waiter ignore it),
//! SIGKILL reaches all of them.

use std::io;
use std::sync::OnceLock;

/// Test-only: `off` makes the hub believe the kernel cannot give commands
/// a PID namespace; `user` makes a root hub use the user-namespace way.
pub const PRETEND_ENV: &str = "TOOLHUB_TEST_PIDNS";

/// What `/proc` a confined command sees, decided once per hub process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProcView {
    /// Its own: a PID namespace with its own `/proc` (`user_ns`: made
    /// inside a user namespace, the way a hub that is not root can).
    Own { user_ns: bool },
    /// The machine's, with the reason the kernel refused a namespace.
    Shared { why: String },
}

/// One line of a `uid_map` or `gid_map`, formatted before the fork.
#[derive(Debug, Clone, Copy)]
struct Line {
    buf: [u8; 48],
    len: usize,
}

impl Line {
    fn of(id: u32) -> Line {
        let text = format!("{id} {id} 1\n");
        let mut buf = [0u8; 48];
        let len = text.len().min(buf.len());
        buf[..len].copy_from_slice(&text.as_bytes()[..len]);
        Line { buf, len }
    }
}

/// Everything the child needs, made before the fork (`Copy`, no heap).
#[derive(Debug, Clone, Copy)]
pub struct NsPlan {
    /// `Some`: make a user namespace with these maps.
    maps: Option<(Line, Line)>,
    /// The hub's argument and environment strings (`/proc/self/stat`),
    /// zeroed in the init, whose memory is a copy of the hub's.
    scrub: [(usize, usize); 2],
    /// Landlock read rights granted on the new `/proc` (0: none).
    proc_read: u64,
}

impl NsPlan {
    /// The plan for this hub (`user_ns`: the user-namespace way);
    /// `proc_read` is granted on the command's own `/proc`.
    pub fn new(user_ns: bool, proc_read: u64) -> NsPlan {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        NsPlan {
            maps: user_ns.then(|| (Line::of(uid), Line::of(gid))),
            scrub: own_strings(),
            proc_read,
        }
    }
}

/// `(arg_start, arg_end)` and `(env_start, env_end)` of this process.
fn own_strings() -> [(usize, usize); 2] {
    let text = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = text.rsplit_once(')').map_or("", |(_, r)| r);
    // Fields 48 to 51 of proc(5); `rest` starts at field 3.
    let f: Vec<usize> = rest
        .split_whitespace()
        .skip(45)
        .take(4)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    match f.as_slice() {
        [a0, a1, e0, e1] => [(*a0, *a1), (*e0, *e1)],
        _ => [(0, 0); 2],
    }
}

/// This kernel's answer, asked once: can a confined command get its own
/// PID namespace and `/proc` (as root directly, else in a user namespace)?
pub fn view() -> ProcView {
    static VIEW: OnceLock<ProcView> = OnceLock::new();
    VIEW.get_or_init(|| {
        let pretend = std::env::var(PRETEND_ENV).unwrap_or_default();
        if pretend == "off" {
            return ProcView::Shared {
                why: format!("{PRETEND_ENV}=off (test-only)"),
            };
        }
        // SAFETY: a plain getter.
        let root = unsafe { libc::geteuid() } == 0 && pretend != "user";
        let mut tried = Vec::new();
        if root {
            match probe(false) {
                Ok(()) => return ProcView::Own { user_ns: false },
                Err(e) => tried.push(format!("as root: {e}")),
            }
        }
        match probe(true) {
            Ok(()) => ProcView::Own { user_ns: true },
            Err(e) => {
                tried.push(format!("in a user namespace: {e}"));
                ProcView::Shared {
                    why: tried.join("; "),
                }
            }
        }
    })
    .clone()
}

/// Runs `/bin/sh` the way a command runs (without Landlock) and checks
/// that it is PID 2 of a namespace whose `/proc` shows only its own.
fn probe(user_ns: bool) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let plan = NsPlan::new(user_ns, 0);
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("echo $$; ls /proc | grep -c '^[0-9]'")
        .env_clear()
        .stdin(std::process::Stdio::null());
    // SAFETY: `enter` makes system calls only (see its contract).
    unsafe {
        cmd.pre_exec(move || enter(&plan));
    }
    let out = cmd.output().map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let (pid, count) = (lines.next(), lines.next());
    // The shell, `ls`, `grep` and the init: a handful, never the machine's.
    let few = count
        .and_then(|c| c.trim().parse::<u32>().ok())
        .is_some_and(|c| c <= 8);
    if out.status.success() && pid == Some("2") && few {
        Ok(())
    } else {
        Err(format!(
            "the probe said {:?} ({}{})",
            text.trim(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .map(|l| format!(", {l}"))
                .unwrap_or_default()
        ))
    }
}

fn err() -> io::Error {
    io::Error::last_os_error()
}

/// `clone(2)` with `flags` and no new stack: fork semantics.
unsafe fn clone(flags: libc::c_int) -> libc::c_long {
    libc::syscall(
        libc::SYS_clone,
        (flags | libc::SIGCHLD) as libc::c_ulong,
        0usize,
        0usize,
        0usize,
        0usize,
    )
}

/// Closes every descriptor but `keep`.
unsafe fn close_all_but(keep: libc::c_int) {
    let max = libc::c_uint::MAX;
    let k = keep as libc::c_uint;
    let ranged = (k == 0 || libc::syscall(libc::SYS_close_range, 0u32, k - 1, 0u32) == 0)
        && libc::syscall(libc::SYS_close_range, k + 1, max, 0u32) == 0;
    if !ranged {
        for fd in 0..4096 {
            if fd != keep {
                libc::close(fd);
            }
        }
    }
}

unsafe fn write_file(path: &[u8], data: &[u8]) -> io::Result<()> {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(err());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let e = err();
    libc::close(fd);
    if n == data.len() as isize {
        Ok(())
    } else {
        Err(e)
    }
}

/// Zeroes `[start, end)` of this process's memory through
/// `/proc/self/mem` (which reports a bad range instead of faulting).
unsafe fn zero(start: usize, end: usize) {
    static ZEROS: [u8; 4096] = [0; 4096];
    if start == 0 || end <= start {
        return;
    }
    let fd = libc::open(c"/proc/self/mem".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
    if fd < 0 {
        return;
    }
    let mut at = start;
    while at < end {
        let n = (end - at).min(ZEROS.len());
        if libc::pwrite(fd, ZEROS.as_ptr().cast(), n, at as libc::off_t) <= 0 {
            break;
        }
        at += n;
    }
    libc::close(fd);
}

/// Ends this process the way `status` (a wait status) ended: the same
/// exit code, or the same signal.
unsafe fn mirror(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
    if libc::WIFEXITED(status) {
        libc::_exit(libc::WEXITSTATUS(status));
    }
    libc::_exit(125)
}

/// Waits for `pid`, retrying on EINTR; its wait status, or `None`.
unsafe fn wait(pid: libc::pid_t) -> Option<(libc::pid_t, libc::c_int)> {
    loop {
        let mut status = 0;
        let got = libc::waitpid(pid, &mut status, 0);
        if got >= 0 {
            return Some((got, status));
        }
        if err().raw_os_error() != Some(libc::EINTR) {
            return None;
        }
    }
}

/// Between fork and exec, in the hub's child: make the namespaces and the
/// processes of the module comment. Returns only in the shell (`Ok`), or
/// with the error that stops the command from starting (the hub's spawn
/// reports it).
///
/// # Safety
/// Only between fork and exec of a `Command`: it makes system calls and
/// never allocates, but ends the calling process (the waiter, the init)
/// with `_exit`.
pub unsafe fn enter(plan: &NsPlan) -> io::Result<()> {
    // The waiter and the init hold a copy of the hub's memory: never a
    // core file of it (and not dumpable, below, once the init has written
    // its maps: /proc/self of a process that is not dumpable is root's).
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    libc::setrlimit(libc::RLIMIT_CORE, &no_core);
    let mut fds = [0 as libc::c_int; 2];
    if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
        return Err(err());
    }
    let (status_r, status_w) = (fds[0], fds[1]);
    let mut flags = libc::CLONE_NEWPID | libc::CLONE_NEWNS;
    if plan.maps.is_some() {
        flags |= libc::CLONE_NEWUSER;
    }
    let init = clone(flags);
    if init < 0 {
        return Err(err());
    }
    if init > 0 {
        waiter(init as libc::pid_t, status_r, status_w);
    }
    libc::close(status_r);
    init_process(plan, status_w)
}

/// The waiter: its descriptors closed (the hub's spawn sees the shell's
/// exec, the pipes see the command's end), SIGTERM ignored, ends as the
/// shell did.
unsafe fn waiter(init: libc::pid_t, status_r: libc::c_int, status_w: libc::c_int) -> ! {
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    libc::close(status_w);
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT] {
        libc::signal(sig, libc::SIG_IGN);
    }
    libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    close_all_but(status_r);
    let Some((_, init_status)) = wait(init) else {
        libc::_exit(125)
    };
    let mut shell: libc::c_int = 0;
    let n = libc::read(
        status_r,
        (&mut shell as *mut libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>(),
    );
    if n == std::mem::size_of::<libc::c_int>() as isize {
        mirror(shell)
    }
    mirror(init_status)
}

/// PID 1: maps, mounts, the shell, then reaping. Returns only in the
/// shell.
unsafe fn init_process(plan: &NsPlan, status_w: libc::c_int) -> io::Result<()> {
    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    // The waiter died before the line above: no signal will come.
    let mut pfd = libc::pollfd {
        fd: status_w,
        events: libc::POLLOUT,
        revents: 0,
    };
    if libc::poll(&mut pfd, 1, 0) > 0 && pfd.revents & libc::POLLERR != 0 {
        libc::_exit(125);
    }
    libc::prctl(libc::PR_SET_NAME, c"toolhub-pid1".as_ptr(), 0, 0, 0);
    if let Some((uid, gid)) = &plan.maps {
        write_file(b"/proc/self/setgroups\0", b"deny")?;
        write_file(b"/proc/self/uid_map\0", &uid.buf[..uid.len])?;
        write_file(b"/proc/self/gid_map\0", &gid.buf[..gid.len])?;
    }
    // Through /proc/self/mem, which a process that is not dumpable
    // cannot open unless it is root: before the line after.
    for (start, end) in plan.scrub {
        zero(start, end);
    }
    libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
    // Private first, or the new /proc would replace the machine's.
    let none = std::ptr::null::<libc::c_char>();
    if libc::mount(
        none,
        c"/".as_ptr(),
        none,
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
    ) != 0
    {
        return Err(err());
    }
    let proc_flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    if libc::mount(
        c"proc".as_ptr(),
        c"/proc".as_ptr(),
        c"proc".as_ptr(),
        proc_flags,
        std::ptr::null(),
    ) != 0
    {
        return Err(err());
    }
    let shell = clone(0);
    if shell < 0 {
        return Err(err());
    }
    if shell == 0 {
        libc::close(status_w);
        return Ok(());
    }
    libc::signal(libc::SIGCHLD, libc::SIG_DFL);
    close_all_but(status_w);
    loop {
        match wait(-1) {
            Some((pid, status)) if pid as libc::c_long == shell => {
                libc::write(
                    status_w,
                    (&status as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>(),
                );
                libc::_exit(0)
            }
            Some(_) => {}
            None => libc::_exit(125),
        }
    }
}

/// In the shell, before Landlock: grant the read rights of the plan on
/// the new `/proc` (the ruleset's grant of the machine's `/proc` names
/// another mount).
///
/// # Safety
/// Between fork and exec; `ruleset` is the call's Landlock ruleset.
pub unsafe fn grant_proc(ruleset: libc::c_int, plan: &NsPlan) -> io::Result<()> {
    #[repr(C, packed)]
    struct PathBeneath {
        allowed_access: u64,
        parent_fd: i32,
    }
    const RULE_PATH_BENEATH: libc::c_int = 1;
    if plan.proc_read == 0 {
        return Ok(());
    }
    let fd = libc::open(
        c"/proc".as_ptr(),
        libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
    );
    if fd < 0 {
        return Err(err());
    }
    let attr = PathBeneath {
        allowed_access: plan.proc_read,
        parent_fd: fd,
    };
    let r = libc::syscall(
        libc::SYS_landlock_add_rule,
        ruleset,
        RULE_PATH_BENEATH,
        &attr as *const PathBeneath,
        0u32,
    );
    let e = err();
    libc::close(fd);
    if r == 0 {
        Ok(())
    } else {
        Err(e)
    }
}
