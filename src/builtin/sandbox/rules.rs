//! The Landlock ruleset of one call, built in the hub before the fork:
//! the write rights beneath the writable folders, the read rights
//! everywhere but the denied paths ([`reads::plan`]), a few device files,
//! and the network and scope restrictions.

use std::path::PathBuf;

use super::reads::{self, ReadPolicy};
use super::{Prepared, DEVICES, NET_ABI, SCOPE_ABI};

/// The Landlock bits of the read rights the ruleset grants (`ReadFile`,
/// `ReadDir`), for a rule added in the child.
#[cfg(target_os = "linux")]
pub(super) fn read_bits() -> u64 {
    use landlock::{AccessFs, BitFlags};
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    read.bits()
}

#[cfg(not(target_os = "linux"))]
pub(super) fn read_bits() -> u64 {
    0
}

#[cfg(target_os = "linux")]
pub(super) fn ruleset(
    abi: i32,
    network: bool,
    writable: &[PathBuf],
    policy: &ReadPolicy,
) -> Result<Prepared, String> {
    use landlock::{
        AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
        RulesetAttr, RulesetCreatedAttr, Scope, ABI,
    };
    let level = ABI::from(abi);
    let write = AccessFs::from_write(level);
    let read: BitFlags<AccessFs> = AccessFs::ReadFile | AccessFs::ReadDir;
    let file = AccessFs::from_file(level);
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(write | read)
        .map_err(|e| e.to_string())?;
    if !network && abi >= NET_ABI {
        rs = rs
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(|e| e.to_string())?;
    }
    if abi >= SCOPE_ABI {
        rs = rs.scope(Scope::Signal).map_err(|e| e.to_string())?;
        if !network {
            rs = rs
                .scope(Scope::AbstractUnixSocket)
                .map_err(|e| e.to_string())?;
        }
    }
    let mut created = rs.create().map_err(|e| e.to_string())?;
    for dir in writable {
        PathFd::new(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    for rule in reads::plan(policy, writable) {
        let mut access = match rule.level {
            reads::Level::Read => read,
            reads::Level::Write => write | read,
            reads::Level::ReadAncestor => AccessFs::ReadDir.into(),
            reads::Level::WriteAncestor => write | AccessFs::ReadDir,
        };
        if !rule.dir {
            access &= file;
        }
        if access.is_empty() {
            continue;
        }
        // An entry that vanished since it was listed is simply not granted.
        let Ok(fd) = PathFd::new(&rule.path) else {
            continue;
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(|e| format!("{}: {e}", rule.path.display()))?;
    }
    let device = (write | read) & file;
    for dev in DEVICES {
        // A device this machine lacks is simply not granted.
        let Ok(fd) = PathFd::new(dev) else { continue };
        created = created
            .add_rule(PathBeneath::new(fd, device))
            .map_err(|e| format!("{dev}: {e}"))?;
    }
    let fd: Option<std::os::fd::OwnedFd> = created.into();
    fd.map(|fd| Prepared { fd, ns: None })
        .ok_or_else(|| "the kernel returned no ruleset".to_string())
}

#[cfg(not(target_os = "linux"))]
pub(super) fn ruleset(
    _abi: i32,
    _network: bool,
    _writable: &[PathBuf],
    _policy: &ReadPolicy,
) -> Result<Prepared, String> {
    Err("Landlock exists only on Linux".into())
}
