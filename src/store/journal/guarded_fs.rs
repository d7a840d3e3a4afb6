//! Filesystem helpers for the journal: directory checks, symlink refusal and
//! the `openat` create that keeps a swapped directory from redirecting a journal.

use std::ffi::{CString, OsStr};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use super::SUFFIX;
use crate::store::valid_id;

pub(super) fn truncate(path: &Path, len: u64) -> io::Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    file.set_len(len)?;
    file.sync_all()
}

pub(super) fn ensure_dir(dir: &Path) -> io::Result<()> {
    match fs::symlink_metadata(dir) {
        Ok(meta) => check_dir_meta(&meta, dir),
        Err(e) if e.kind() == io::ErrorKind::NotFound => fs::DirBuilder::new()
            .recursive(true)
            .mode(crate::store::private::DIR_MODE)
            .create(dir)
            .map_err(|e| with_path(e, dir)),
        Err(e) => Err(with_path(e, dir)),
    }
}

pub(super) fn check_dir_meta(meta: &fs::Metadata, dir: &Path) -> io::Result<()> {
    if meta.file_type().is_symlink() {
        return Err(invalid_input(format!(
            "journal dir {} is a symlink; refusing to follow it (configure the real directory)",
            dir.display()
        )));
    }
    if !meta.is_dir() {
        return Err(invalid_input(format!(
            "journal dir {} is not a directory",
            dir.display()
        )));
    }
    Ok(())
}

/// Open `dir` itself without following a symlink, so the file is created in
/// the directory that was checked even if the path is swapped meanwhile.
pub(super) fn open_dir_nofollow(dir: &Path) -> io::Result<OwnedFd> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(dir)
        .map(OwnedFd::from)
        .map_err(|e| with_path(refuse_link(e), dir))
}

/// `openat(dir_fd, name, O_CREAT|O_EXCL|O_NOFOLLOW, 0600)` for appending
/// (the modes of `store::private`).
pub(super) fn create_in(dir_fd: &OwnedFd, name: &str) -> io::Result<File> {
    let cname = CString::new(name)
        .map_err(|_| invalid_input(format!("journal file name {name:?} contains NUL")))?;
    let flags = libc::O_WRONLY
        | libc::O_APPEND
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_NOFOLLOW
        | libc::O_CLOEXEC;
    // SAFETY: `dir_fd` is an open directory descriptor borrowed for the call
    // and `cname` is a NUL-terminated string that outlives it; openat does not
    // retain either pointer.
    let fd = unsafe {
        libc::openat(
            dir_fd.as_raw_fd(),
            cname.as_ptr(),
            flags,
            crate::store::private::FILE_MODE as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat just returned this descriptor and nothing else owns it.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The task id named by a journal path, or `InvalidInput`.
pub(super) fn journal_name(path: &Path) -> io::Result<&str> {
    path.file_name().and_then(journal_stem).ok_or_else(|| {
        invalid_input(format!(
            "{} is not a journal path; expected <task id>{SUFFIX}",
            path.display()
        ))
    })
}

pub(super) fn journal_stem(name: &OsStr) -> Option<&str> {
    // as_bytes + from_utf8 rather than to_str: both refuse non-UTF-8 names.
    let name = std::str::from_utf8(name.as_bytes()).ok()?;
    name.strip_suffix(SUFFIX).filter(|stem| valid_id(stem))
}

/// O_NOFOLLOW reports a symlink as ELOOP ("too many levels of symbolic
/// links"), which misleads; say what was refused.
pub(super) fn refuse_link(e: io::Error) -> io::Error {
    if e.raw_os_error() == Some(libc::ELOOP) {
        invalid_input("is a symlink; journals are never opened through links".to_string())
    } else {
        e
    }
}

pub(super) fn with_path(e: io::Error, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

pub(super) fn invalid_input(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}
