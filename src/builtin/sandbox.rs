//! The sandbox of `run_command` (`builtin.sandbox`): Landlock, the way
//! Codex CLI confines its shell on Linux.
//!
//! What is decided where:
//! - at start-up, [`Sandbox::new`] asks the kernel for its Landlock ABI and
//!   [`decide`]s (pure) whether commands run confined, are refused (Landlock
//!   missing, or too old for what the config asks), or run unconfined
//!   (`"off"`); the start-up log and `health_status` say which, in words;
//! - per call, [`Sandbox::prepare`] builds the ruleset in the hub (the
//!   `landlock` crate allocates and opens files, which must not happen
//!   between fork and exec) and [`confine`] installs a `pre_exec` hook that
//!   only makes two system calls in the child: `prctl(PR_SET_NO_NEW_PRIVS)`
//!   and `landlock_restrict_self(fd)`. Nothing in the child allocates.
//!
//! The ruleset handles every *write* right of the kernel's ABI and the
//! read rights (`ReadFile`, `ReadDir`; execution stays unrestricted). It
//! grants the write rights beneath the writable folders: the workspace, the
//! calling connection's current run folder (`workspace-write`) and the
//! hub's private temp dir (both modes), passed to the command as `TMPDIR`.
//! It grants reading everywhere but the denied paths
//! (`builtin.sandboxDenyRead`, and the hub's own config file and state
//! dir), by allowance around them ([`reads`]). A few device files
//! (`/dev/null`, …) stay writable so ordinary redirections work. With
//! `builtin.sandboxNetwork: false` TCP bind and connect are denied (ABI 4);
//! from ABI 6 the command may not signal processes outside its sandbox
//! (the hub among them), and with the network denied may not reach
//! abstract unix sockets outside it.
//!
//! [`denied`] reads a failed command's stderr for the paths the sandbox
//! refused, so the caller gets a `PERMISSION` error naming them and the
//! key that decides ([`explain`]).

pub mod denied;
mod explain;
pub mod pidns;
pub mod reads;
mod rules;

use std::path::{Path, PathBuf};

use crate::config::{BuiltinConfig, SandboxMode};
use crate::errors::{ErrorType, HubError};
use crate::hub::health::Check;

/// Test-only: pretend the kernel reports this Landlock ABI (`0` = no
/// Landlock), so the "Landlock missing" path can be tested on any kernel.
/// Never set it in production: a number above the real ABI makes every
/// confined command fail to start.
pub const PRETEND_ABI_ENV: &str = "TOOLHUB_TEST_LANDLOCK_ABI";

/// Landlock ABI that restricts `truncate(2)` (Linux 6.2): below it a
/// command could still empty any file the hub's user owns.
pub const MIN_ABI: i32 = 3;
/// Landlock ABI that restricts TCP bind and connect (Linux 6.7).
pub const NET_ABI: i32 = 4;
/// Landlock ABI that scopes signals and abstract unix sockets (Linux 6.12).
pub const SCOPE_ABI: i32 = 6;

/// Device files a confined command may still write (and truncate, and
/// `ioctl`): the targets of ordinary redirections.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/tty",
    "/dev/random",
    "/dev/urandom",
];

/// Where a command may write besides the workspace: the current run of the
/// calling connection (the seam `run:` paths use too).
pub use super::run_path::RunFolder;

/// What the hub does with `run_command`, decided once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// Confined with this Landlock ABI.
    Confined { abi: i32 },
    /// Refused: the kernel cannot give what the config asks for.
    Refused { why: String, fix: String },
    /// `builtin.sandbox: "off"`: unconfined, by the operator's choice.
    Unconfined,
}

/// The pure decision: the mode, whether TCP is allowed, and the kernel's
/// Landlock ABI (`<= 0`: none) → what `run_command` does.
pub fn decide(mode: SandboxMode, network: bool, abi: i32) -> Confinement {
    let off = "or set builtin.sandbox to \"off\" in config.json (a config reload applies it) to run commands unconfined (they can then write anywhere the hub's user can)";
    if mode == SandboxMode::Off {
        return Confinement::Unconfined;
    }
    if abi <= 0 {
        return Confinement::Refused {
            why: "Landlock is not available on this kernel (not built in, or not in the boot parameter lsm=…)".into(),
            fix: format!("run the hub on Linux 6.2 or newer with Landlock enabled (lsm=…,landlock), {off}"),
        };
    }
    if abi < MIN_ABI {
        return Confinement::Refused {
            why: format!("this kernel's Landlock (ABI {abi}) cannot stop a command from truncating files outside the workspace; ABI {MIN_ABI} (Linux 6.2) can"),
            fix: format!("run the hub on Linux 6.2 or newer, {off}"),
        };
    }
    if !network && abi < NET_ABI {
        return Confinement::Refused {
            why: format!("builtin.sandboxNetwork is false (the default), but this kernel's Landlock (ABI {abi}) cannot deny TCP; ABI {NET_ABI} (Linux 6.7) can"),
            fix: format!("set builtin.sandboxNetwork to true (commands may then use the network), run the hub on Linux 6.7 or newer, {off}"),
        };
    }
    Confinement::Confined { abi }
}

/// The kernel's Landlock ABI (`0` when it has none), or the test-only
/// [`PRETEND_ABI_ENV`].
pub fn kernel_abi() -> i32 {
    if let Some(n) = std::env::var(PRETEND_ABI_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
    {
        return n;
    }
    real_abi()
}

#[cfg(target_os = "linux")]
fn real_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the VERSION flag the call
    // only returns the ABI number (or an error); it touches no memory.
    let n = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(n).unwrap_or(0).max(0)
}

#[cfg(not(target_os = "linux"))]
fn real_abi() -> i32 {
    0
}

/// The sandbox of one hub: the mode, the verdict and the writable folders.
#[derive(Debug)]
pub struct Sandbox {
    mode: SandboxMode,
    network: bool,
    verdict: Confinement,
    workspace: PathBuf,
    /// The private temp dir (`TMPDIR` of every command).
    tmp: PathBuf,
    /// What a confined command may not read.
    reads: reads::ReadPolicy,
    /// What `/proc` a confined command sees.
    procs: pidns::ProcView,
    /// How its own PID namespace is made (`procs` is `Own`).
    ns: Option<pidns::NsPlan>,
}

/// A ruleset ready to be applied in a child; closed when dropped.
pub struct Prepared {
    #[cfg(target_os = "linux")]
    fd: std::os::fd::OwnedFd,
    /// The command's own PID namespace, when the kernel gives one.
    ns: Option<pidns::NsPlan>,
}

impl Sandbox {
    /// Decide for `cfg` on this kernel, create the private temp dir
    /// `<stateDir>/tmp` (emptied: one hub per state dir, and the caller
    /// holds its lock) and log what the hub does.
    pub fn new(
        cfg: &BuiltinConfig,
        workspace: &Path,
        state_dir: &Path,
    ) -> std::io::Result<Sandbox> {
        let tmp = state_dir.join("tmp");
        // What the last run's commands left. A leftover a command made
        // unremovable (a folder chmod 0) must not stop the hub from starting.
        if tmp.exists() {
            if let Err(e) = std::fs::remove_dir_all(&tmp) {
                tracing::warn!(path = %tmp.display(), error = %e, "could not empty run_command's temp dir; its leftovers stay");
            }
        }
        std::fs::create_dir_all(&tmp)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700))?;
        }
        let tmp = std::fs::canonicalize(&tmp).unwrap_or(tmp);
        let mut sandbox = Sandbox::with_verdict(
            cfg,
            workspace,
            tmp,
            decide(cfg.sandbox, cfg.sandbox_network, kernel_abi()),
        );
        sandbox.reads.private.push(state_dir.to_path_buf());
        if matches!(sandbox.verdict, Confinement::Confined { .. }) {
            sandbox.procs = pidns::view();
            if let pidns::ProcView::Own { user_ns } = sandbox.procs {
                // The new /proc is read like the rest, unless a denied
                // path lies in it.
                let proc_read = if sandbox.reads.deny.iter().any(|d| d.starts_with("/proc")) {
                    0
                } else {
                    rules::read_bits()
                };
                sandbox.ns = Some(pidns::NsPlan::new(user_ns, proc_read));
            }
        }
        sandbox.log_start();
        Ok(sandbox)
    }

    /// A sandbox with a verdict already made (`new` after deciding; unit
    /// tests, for any kernel). Creates nothing and logs nothing.
    pub fn with_verdict(
        cfg: &BuiltinConfig,
        workspace: &Path,
        tmp: PathBuf,
        verdict: Confinement,
    ) -> Sandbox {
        Sandbox {
            mode: cfg.sandbox,
            network: cfg.sandbox_network,
            verdict,
            workspace: workspace.to_path_buf(),
            tmp,
            reads: reads::ReadPolicy {
                deny: cfg.sandbox_deny_read.clone(),
                allow: cfg.sandbox_allow_read.clone(),
                private: vec![cfg.config_file.clone()],
            },
            procs: pidns::ProcView::Shared {
                why: "not asked".into(),
            },
            ns: None,
        }
    }

    pub fn mode(&self) -> SandboxMode {
        self.mode
    }

    pub fn verdict(&self) -> &Confinement {
        &self.verdict
    }

    /// The private temp dir, passed as `TMPDIR`.
    pub fn tmp(&self) -> &Path {
        &self.tmp
    }

    /// What a confined command may write, in words.
    fn reach(&self) -> String {
        let tmp = self.tmp.display();
        match self.mode {
            SandboxMode::WorkspaceWrite => format!(
                "run_command may write only in the workspace {}, the current run's folder (when one is set) and its temp dir {tmp} (TMPDIR)",
                self.workspace.display()
            ),
            _ => format!("run_command may write nothing but its temp dir {tmp} (TMPDIR)"),
        }
    }

    /// What a confined command may not read, in words.
    pub fn read_words(&self) -> String {
        let list = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| reads::tilde(p))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = format!(
            "it may read everything but {} (builtin.sandboxDenyRead) and the hub's own {} (always)",
            if self.reads.deny.is_empty() {
                "nothing listed".to_string()
            } else {
                list(&self.reads.deny)
            },
            list(&self.reads.private)
        );
        if !self.reads.allow.is_empty() {
            s.push_str(&format!(
                ", re-granted: {} (builtin.sandboxAllowRead)",
                list(&self.reads.allow)
            ));
        }
        s.push_str("; names in a denied folder can be listed, not read");
        s
    }

    fn net_words(&self, abi: i32) -> String {
        let mut s = if self.network {
            "network allowed (builtin.sandboxNetwork)".to_string()
        } else {
            "TCP connect and bind denied (UDP and unix sockets are not covered)".to_string()
        };
        if abi >= SCOPE_ABI {
            s.push_str("; it may not signal processes outside its sandbox");
        } else {
            s.push_str(&format!(
                "; signals to other processes are not restricted (ABI {SCOPE_ABI} needed)"
            ));
        }
        s
    }

    /// What `/proc` a confined command sees, in words.
    fn proc_words(&self) -> String {
        match &self.procs {
            pidns::ProcView::Own { user_ns } => format!(
                "other processes are out of sight: each command runs in a PID namespace of its own with its own /proc{}, so no /proc/<pid>/environ or cmdline of the hub, its servers or any other program",
                if *user_ns { " (made in a user namespace)" } else { "" }
            ),
            pidns::ProcView::Shared { why } => format!(
                "other processes are NOT hidden: the kernel gave no PID namespace ({why}), so a command can read other processes' /proc/<pid>/cmdline{} (the shell gate asks before reads of /proc/*/environ and cmdline); allow unprivileged user namespaces (sysctl user.max_user_namespaces > 0; kernel.unprivileged_userns_clone=1 on Debian; kernel.apparmor_restrict_unprivileged_userns=0 on Ubuntu) and restart the hub",
                // SAFETY: a plain getter.
                if unsafe { libc::geteuid() } == 0 { " and environ (the hub runs as root)" } else { "" }
            ),
        }
    }

    /// The `sandbox` entry of `health_status`.
    pub fn check(&self) -> Check {
        let mode = self.mode.as_str();
        match &self.verdict {
            Confinement::Confined { abi } => Check {
                name: "sandbox".into(),
                ok: true,
                message: format!(
                    "run_command is confined by Landlock (ABI {abi}, builtin.sandbox \"{mode}\"): {}; {}; {}; {}",
                    self.reach(),
                    self.read_words(),
                    self.net_words(*abi),
                    self.proc_words()
                ),
                fix: None,
            },
            Confinement::Refused { why, fix } => Check {
                name: "sandbox".into(),
                ok: false,
                message: format!("{why}: run_command is refused (builtin.sandbox \"{mode}\")"),
                fix: Some(fix.clone()),
            },
            Confinement::Unconfined => Check {
                name: "sandbox".into(),
                ok: false,
                message: "builtin.sandbox is \"off\": run_command runs UNCONFINED, with every right of the hub's user (it can write anywhere the hub can, e.g. ~/.bashrc)".into(),
                fix: Some("set builtin.sandbox to \"workspace-write\" (the default) in config.json (a config reload applies it)".into()),
            },
        }
    }

    fn log_start(&self) {
        let c = self.check();
        match (&self.verdict, c.fix) {
            (Confinement::Confined { .. }, _) if self.ns.is_none() => {
                tracing::warn!("{}", c.message)
            }
            (Confinement::Confined { .. }, _) => tracing::info!("{}", c.message),
            (_, Some(fix)) => tracing::warn!("{}; fix: {fix}", c.message),
            (_, None) => tracing::warn!("{}", c.message),
        }
    }

    /// The error of a call the hub will not run (Landlock missing), or
    /// `None` when commands may run.
    pub fn refusal(&self) -> Option<HubError> {
        match &self.verdict {
            Confinement::Refused { why, fix } => Some(
                HubError::new(
                    ErrorType::Permission,
                    format!("run_command is refused: {why}; the hub does not run shell commands unconfined unless builtin.sandbox is \"off\""),
                )
                .with_suggestion(fix.clone()),
            ),
            _ => None,
        }
    }

    /// The folders a confined command may write in for this call.
    pub fn writable(&self, run_folder: Option<PathBuf>) -> Vec<PathBuf> {
        let mut dirs = vec![self.tmp.clone()];
        if self.mode == SandboxMode::WorkspaceWrite {
            dirs.push(self.workspace.clone());
            dirs.extend(run_folder);
        }
        dirs
    }

    /// Build the ruleset for one call (in the hub, before the fork).
    /// `None` when commands run unconfined.
    pub fn prepare(&self, writable: &[PathBuf]) -> Result<Option<Prepared>, HubError> {
        match &self.verdict {
            Confinement::Unconfined => Ok(None),
            Confinement::Refused { .. } => Err(self.refusal().unwrap_or_else(|| {
                HubError::new(ErrorType::Permission, "run_command is refused")
            })),
            Confinement::Confined { abi } => rules::ruleset(*abi, self.network, writable, &self.reads)
                .map(|p| Some(Prepared { ns: self.ns, ..p }))
                .map_err(|e| {
                    HubError::new(
                        ErrorType::Permission,
                        format!("run_command is refused: its Landlock sandbox could not be built: {e}"),
                    )
                    .with_suggestion("check that the workspace and the state dir's tmp folder exist; health_check shows the sandbox; or set builtin.sandbox to \"off\" (a config reload applies it) to run commands unconfined")
                }),
        }
    }
}

/// Make `cmd`'s child confine itself between fork and exec: no new
/// privileges (setuid binaries lose their power), then the ruleset. The
/// hook makes two system calls and allocates nothing; the descriptor is
/// closed in the hub when `cmd` is dropped, and in the child at exec
/// (Landlock rulesets are close-on-exec).
pub fn confine(cmd: &mut tokio::process::Command, prepared: Prepared) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let ruleset = prepared.fd;
        let ns = prepared.ns;
        // SAFETY: prctl and the raw landlock syscall are async-signal-safe
        // and touch only the descriptor the closure owns; `pidns::enter`
        // and `grant_proc` make system calls only.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(plan) = &ns {
                    pidns::enter(plan)?;
                    pidns::grant_proc(ruleset.as_raw_fd(), plan)?;
                }
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(
                    libc::SYS_landlock_restrict_self,
                    ruleset.as_raw_fd(),
                    0 as libc::c_uint,
                ) != 0
                {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (cmd, prepared);
}

#[cfg(test)]
mod tests;
