//! Secret values, masked by value wherever the hub writes, the way CI
//! systems mask secrets in their logs. Redaction by key (`security.
//! redactKeys` in `history::redact`) catches `{"password": "…"}`; this
//! catches the same value anywhere else: `"login with hunter2"`, a server's
//! API key echoed in a tool's output, an error message that quotes it.
//!
//! The set has two parts: the values of one config (server `env`/`headers`
//! values whose keys are secret, a fixed token), fixed when it is parsed,
//! and the values added while the hub runs (the generated token, secret
//! batch variables, `options.secrets`, replay variables), shared by every
//! later config so a reload keeps them.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use serde_json::Value;

/// Shorter values are never masked: they would mask half of every text.
pub const MIN_CHARS: usize = 4;
/// What a masked value is replaced with.
pub const MASK: &str = "***";

#[derive(Clone, Default)]
pub struct SecretValues {
    configured: Arc<BTreeSet<String>>,
    added: Arc<RwLock<BTreeSet<String>>>,
}

impl std::fmt::Debug for SecretValues {
    // Never the values themselves.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let added = self.added.read().map(|a| a.len()).unwrap_or(0);
        write!(
            f,
            "SecretValues({} configured, {added} added)",
            self.configured.len()
        )
    }
}

/// The values the log writer masks (the binary's `MaskedStderr`): the
/// set in force, replaced on every config change.
static LOGS: RwLock<Option<SecretValues>> = RwLock::new(None);

/// Mask log lines with `values` from now on.
pub fn mask_logs_with(values: &SecretValues) {
    let mut logs = match LOGS.write() {
        Ok(l) => l,
        Err(poisoned) => poisoned.into_inner(),
    };
    *logs = Some(values.clone());
}

/// A log line with every known secret value masked.
pub fn mask_log_text(s: &str) -> Cow<'_, str> {
    let logs = match LOGS.read() {
        Ok(l) => l,
        Err(poisoned) => poisoned.into_inner(),
    };
    match logs.as_ref() {
        Some(v) => v.mask_str(s),
        None => Cow::Borrowed(s),
    }
}

fn long_enough(s: &str) -> bool {
    s.chars().count() >= MIN_CHARS
}

impl SecretValues {
    /// The values of one config; values shorter than [`MIN_CHARS`] are left out.
    pub fn configured(values: impl IntoIterator<Item = String>) -> SecretValues {
        SecretValues {
            configured: Arc::new(values.into_iter().filter(|v| long_enough(v)).collect()),
            added: Arc::default(),
        }
    }

    /// Keep the values added while the hub ran under `older` (a reload).
    pub fn adopt(&mut self, older: &SecretValues) {
        self.added = older.added.clone();
    }

    /// Add a value for the rest of the hub's run.
    pub fn add(&self, value: &str) {
        if !long_enough(value) {
            return;
        }
        let mut added = match self.added.write() {
            Ok(a) => a,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !self.configured.contains(value) && !added.contains(value) {
            added.insert(value.to_string());
        }
    }

    /// Add every string (and number) inside `v`.
    pub fn add_value(&self, v: &Value) {
        match v {
            Value::String(s) => self.add(s),
            Value::Number(n) => self.add(&n.to_string()),
            Value::Array(a) => a.iter().for_each(|x| self.add_value(x)),
            Value::Object(m) => m.values().for_each(|x| self.add_value(x)),
            Value::Bool(_) | Value::Null => {}
        }
    }

    /// Run `f` with every value, longest first (so a value that contains a
    /// shorter one is masked whole).
    pub fn with_values<R>(&self, f: impl FnOnce(&[&str]) -> R) -> R {
        let added = match self.added.read() {
            Ok(a) => a,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut all: Vec<&str> = self
            .configured
            .iter()
            .chain(added.iter())
            .map(String::as_str)
            .collect();
        all.sort_by_key(|s| Reverse(s.len()));
        f(&all)
    }

    pub fn is_empty(&self) -> bool {
        self.configured.is_empty() && self.added.read().map(|a| a.is_empty()).unwrap_or(true)
    }

    /// `s` with every secret value replaced by [`MASK`].
    pub fn mask_str<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if self.is_empty() {
            return Cow::Borrowed(s);
        }
        self.with_values(|values| mask_with(s, values))
    }

    /// Mask `s` in place.
    pub fn mask_string(&self, s: &mut String) {
        if let Cow::Owned(m) = self.mask_str(s) {
            *s = m;
        }
    }

    /// Mask every string inside `v` (object keys too) in place.
    pub fn mask_in_place(&self, v: &mut Value) {
        if self.is_empty() {
            return;
        }
        self.with_values(|values| mask_value(v, values));
    }
}

/// `s` with each of `values` (longest first) replaced by [`MASK`].
pub fn mask_with<'a>(s: &'a str, values: &[&str]) -> Cow<'a, str> {
    let mut out = Cow::Borrowed(s);
    for secret in values {
        if out.contains(secret) {
            out = Cow::Owned(out.replace(secret, MASK));
        }
    }
    out
}

fn mask_value(v: &mut Value, values: &[&str]) {
    match v {
        Value::String(s) => {
            if let Cow::Owned(masked) = mask_with(s, values) {
                *s = masked;
            }
        }
        // Only a number that is a secret as a whole: digits inside
        // timestamps and counters are not masked.
        Value::Number(n) => {
            let text = n.to_string();
            if values.contains(&text.as_str()) {
                *v = Value::String(MASK.to_string());
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mask_value(x, values)),
        Value::Object(m) => {
            let keys_hit = m
                .keys()
                .any(|k| matches!(mask_with(k, values), Cow::Owned(_)));
            if keys_hit {
                let old = std::mem::take(m);
                for (k, x) in old {
                    m.insert(mask_with(&k, values).into_owned(), x);
                }
            }
            m.values_mut().for_each(|x| mask_value(x, values));
        }
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_masked_anywhere_longest_first_and_short_ones_never() {
        let s = SecretValues::configured(["hunter2".to_string(), "abc".to_string()]);
        s.add("hunter2-long");
        s.add("xyz");
        assert_eq!(s.mask_str("login with hunter2!"), "login with ***!");
        assert_eq!(s.mask_str("k=hunter2-long"), "k=***");
        assert_eq!(s.mask_str("abc xyz"), "abc xyz", "shorter than 4 chars");
        let mut v = json!({"a": ["x hunter2 y", {"hunter2": 1}], "n": 5});
        s.mask_in_place(&mut v);
        assert_eq!(v, json!({"a": ["x *** y", {"***": 1}], "n": 5}));
        s.add_value(&json!({"pin": 123456}));
        let mut n = json!({"code": 123456});
        s.mask_in_place(&mut n);
        assert_eq!(n, json!({"code": "***"}));
    }

    #[test]
    fn a_reload_keeps_added_values_and_debug_hides_them() {
        let old = SecretValues::configured(["first-secret".to_string()]);
        old.add("added-secret");
        let mut new = SecretValues::configured(["other-secret".to_string()]);
        new.adopt(&old);
        assert_eq!(
            new.mask_str("added-secret first-secret"),
            "*** first-secret"
        );
        assert!(!format!("{new:?}").contains("secret-"));
    }
}
