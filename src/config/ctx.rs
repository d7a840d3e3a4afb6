//! [`Ctx`]: what every validation check needs to report a located error or
//! warning, and the small text and path helpers it uses.

use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use super::locate::Locator;
use super::ConfigError;

/// Carries what every check needs to report a located error or warning.
pub(super) struct Ctx<'a> {
    pub path: &'a Path,
    pub loc: Locator<'a>,
    pub base_dir: PathBuf,
    pub warnings: Vec<(usize, usize, String)>,
}

impl Ctx<'_> {
    /// An error placed at the key named by `pointer`.
    pub fn err(&self, pointer: &str, message: impl Into<String>) -> ConfigError {
        let (line, column) = self.loc.position(pointer);
        ConfigError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            message: one_line(&message.into()),
        }
    }

    pub fn warn(&mut self, pointer: &str, message: impl Into<String>) {
        let (line, column) = self.loc.position(pointer);
        self.warnings
            .push((line, column, one_line(&message.into())));
    }

    /// `v`, or `default` when absent, refused above `max`: the error reads
    /// "KEY VALUE " then `advice` (what is too much and what to use).
    pub fn at_most<T>(
        &self,
        v: Option<T>,
        default: T,
        max: T,
        ptr: &str,
        advice: impl FnOnce() -> String,
    ) -> Result<T, ConfigError>
    where
        T: Copy + PartialOrd + std::fmt::Display,
    {
        let v = v.unwrap_or(default);
        if v > max {
            return Err(self.err(ptr, format!("{} {v} {}", dotted(ptr), advice())));
        }
        Ok(v)
    }

    /// A duration in ms that must be > 0.
    pub fn ms(&self, v: Option<u64>, default: u64, ptr: &str) -> Result<Duration, ConfigError> {
        Ok(Duration::from_millis(self.positive(v, default, ptr)?))
    }

    /// A count or size that must be > 0.
    pub fn positive<T>(&self, v: Option<T>, default: T, ptr: &str) -> Result<T, ConfigError>
    where
        T: Copy + PartialEq + Default + std::fmt::Display,
    {
        let v = v.unwrap_or(default);
        if v == T::default() {
            return Err(self.err(ptr, format!("{} must be greater than 0", dotted(ptr))));
        }
        Ok(v)
    }

    /// Resolve a configured path against the config folder (`~/` is $HOME).
    pub fn resolve(&self, value: &str, ptr: &str) -> Result<PathBuf, ConfigError> {
        if value.trim().is_empty() {
            return Err(self.err(
                ptr,
                format!("{} must not be empty; expected a path", dotted(ptr)),
            ));
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let p = match (value.strip_prefix("~/"), home) {
            (Some(rest), Some(home)) => home.join(rest),
            _ => PathBuf::from(value),
        };
        Ok(normalize(&self.base_dir.join(p)))
    }
}

/// Messages quote user text (keys, names, patterns) that may hold escaped
/// newlines or control characters; errors and warnings must stay one line.
pub(super) fn one_line(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `/mcpServers/fs/args/0` -> `mcpServers.fs.args.0` for messages.
pub(super) fn dotted(pointer: &str) -> String {
    pointer
        .trim_start_matches('/')
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

/// Drop `.` components (`/cfg/./state` -> `/cfg/state`); `..` is kept because
/// resolving it lexically is wrong across symlinks.
pub(super) fn normalize(p: &Path) -> PathBuf {
    p.components().filter(|c| *c != Component::CurDir).collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::super::test_support::{bad, ok};

    #[test]
    fn relative_paths_resolve_against_the_config_folder() {
        let l = ok(r#"{
            "builtin": {"workspace": "ws"},
            "taskEngine": {"stateDir": "../st"},
            "recording": {"storagePath": "/abs/rec"}}"#);
        let c = l.config;
        assert_eq!(c.builtin.workspace, PathBuf::from("/tmp/cfgtest/ws"));
        assert_eq!(c.task_engine.state_dir, PathBuf::from("/tmp/cfgtest/../st"));
        assert_eq!(c.recording.storage_path, PathBuf::from("/abs/rec"));
        let (_, _, m) = bad(r#"{"builtin": {"workspace": ""}}"#);
        assert!(m.contains("builtin.workspace must not be empty"), "{m}");
    }

    #[test]
    fn messages_stay_one_line_and_zero_is_refused() {
        let (_, _, m) = bad("{\"mcpServers\": {\"a\\nb\": {}}}");
        assert!(m.contains("server name \"a\\nb\" is invalid"), "{m}");
        let w = ok("{\"a\\u0007\": 1}").warnings;
        assert!(w[0].contains("unknown key \"a\\u{7}\""), "{w:?}");
        let (l, c, m) = bad("{\"server\": {\n\"maxConnections\": 0}}");
        assert_eq!((l, c), (2, 1));
        assert_eq!(m, "server.maxConnections must be greater than 0");
        let (_, _, m) = bad(r#"{"mcpServers": {"a": {"command": "x", "timeout": 0}}}"#);
        assert_eq!(m, "mcpServers.a.timeout must be greater than 0");
    }
}
