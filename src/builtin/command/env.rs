//! The environment a command starts from: cleared, then the hub's own
//! variables whose names the allowlist holds (`PATH`, `HOME`, `LANG`,
//! `LC_*`, … and `builtin.commandEnv`), the way Codex CLI's shell
//! environment policy keeps a "core" set. Secrets exported in the shell
//! that started the hub (`OPENAI_API_KEY`, a cloud token) stay out.

use std::ffi::OsString;
use std::sync::Arc;

use crate::config::{glob_match, COMMAND_ENV};

/// Which of the hub's variables a command inherits.
#[derive(Debug, Clone)]
pub struct EnvPolicy {
    /// Names, `*`/`?` globs: the defaults, then the configured ones.
    pass: Arc<[String]>,
}

impl Default for EnvPolicy {
    fn default() -> Self {
        EnvPolicy::with_extra(&[])
    }
}

impl EnvPolicy {
    /// The default names plus `extra` (`builtin.commandEnv`).
    pub fn with_extra(extra: &[String]) -> Self {
        let pass: Vec<String> = COMMAND_ENV
            .iter()
            .map(|s| s.to_string())
            .chain(extra.iter().cloned())
            .collect();
        EnvPolicy { pass: pass.into() }
    }

    /// Does a variable called `name` pass?
    pub fn passes(&self, name: &str) -> bool {
        self.pass.iter().any(|p| glob_match(p, name))
    }

    /// The variables of `vars` (the hub's environment) that pass.
    pub fn inherited(
        &self,
        vars: impl Iterator<Item = (OsString, OsString)>,
    ) -> Vec<(OsString, OsString)> {
        vars.filter(|(k, _)| k.to_str().is_some_and(|k| self.passes(k)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_allowlist_and_the_configured_names_pass() {
        let p = EnvPolicy::with_extra(&["CARGO_HOME".into(), "XDG_*".into()]);
        for name in [
            "PATH",
            "HOME",
            "LANG",
            "LC_ALL",
            "LC_CTYPE",
            "TERM",
            "TMPDIR",
            "CARGO_HOME",
            "XDG_CONFIG_HOME",
        ] {
            assert!(p.passes(name), "{name}");
        }
        for name in [
            "OPENAI_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "TOOLHUB_TOKEN",
            "LD_PRELOAD",
            "PATHX",
            "XDG",
            "lc_all",
        ] {
            assert!(!p.passes(name), "{name}");
        }
        let vars = vec![
            (OsString::from("PATH"), OsString::from("/bin")),
            (OsString::from("SECRET"), OsString::from("s")),
        ];
        assert_eq!(
            EnvPolicy::default().inherited(vars.into_iter()),
            vec![(OsString::from("PATH"), OsString::from("/bin"))]
        );
    }
}
