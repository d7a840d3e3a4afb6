//! Which keys config.json may hold: [`sections`] lists every object of the
//! file and the keys the loader accepts in it (read from the Raw types
//! themselves, so the list cannot drift from what serde parses), and
//! [`REMOVED`] the keys that older versions accepted. [`unknown_keys`]
//! walks a file by that list; `tests/config_docs.rs` checks
//! docs/configuration.md against it.

use serde::de::{self, Visitor};
use serde::Deserialize;
use serde_json::Value;

use super::locate::esc;
use super::raw::*;
use super::views::{RawClient, RawRename, RawView};

/// The (renamed) field names serde expects for struct `T`, read by asking `T`
/// to deserialize itself from a deserializer that only records them.
pub fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
    struct Introspect<'f>(&'f mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Introspect<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields recorded"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
            bytes byte_buf option unit unit_struct newtype_struct seq tuple
            tuple_struct map enum identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Introspect(&mut fields));
    fields
}

/// Every object of config.json whose keys the loader knows, as a dotted
/// path (`""` is the top level; `*` is any name of a map or any item of a
/// list), with those keys. Free-form maps (env, headers, match, annotations)
/// are not objects of the file in this sense.
pub fn sections() -> [(&'static str, &'static [&'static str]); 21] {
    [
        ("", fields_of::<RawConfig>()),
        ("server", fields_of::<RawServerSection>()),
        ("mcpServers.*", fields_of::<RawServer>()),
        ("mcpServers.*.tools.*", fields_of::<RawToolOverride>()),
        ("builtin", fields_of::<RawBuiltin>()),
        ("taskEngine", fields_of::<RawTaskEngine>()),
        ("taskEngine.retention", fields_of::<RawRetention>()),
        ("healthCheck", fields_of::<RawHealthCheck>()),
        ("recording", fields_of::<RawRecording>()),
        ("runs", fields_of::<RawRuns>()),
        ("replay", fields_of::<RawReplay>()),
        ("replay.ignore", fields_of::<RawReplayIgnore>()),
        ("retry", fields_of::<RawRetry>()),
        ("retry.strategies.*", fields_of::<RawStrategy>()),
        ("safety", fields_of::<RawSafety>()),
        ("safety.rules.*", fields_of::<RawRule>()),
        ("security", fields_of::<RawSecurity>()),
        ("assertions", fields_of::<RawAssertions>()),
        ("views.*", fields_of::<RawView>()),
        ("views.*.rename.*", fields_of::<RawRename>()),
        ("clients.*", fields_of::<RawClient>()),
    ]
}

/// Keys an older version accepted, by dotted path, and why they went. A
/// config that still has one loads (an upgrade must not stop the hub) with
/// a warning that says so and to delete the key.
pub const REMOVED: &[(&str, &str)] = &[
    (
        "server.spinMicros",
        "the hub no longer spins before it sleeps (it cost CPU for no measured gain)",
    ),
    (
        "taskEngine.maxRetries",
        "it was never acted on: retries follow retry.strategies (and a step's own retry)",
    ),
    (
        "taskEngine.retryDelay",
        "it was never acted on: retries follow retry.strategies (and a step's own retry)",
    ),
];

/// A key serde will ignore.
#[derive(Debug, Clone, PartialEq)]
pub struct UnknownKey {
    /// Pointer of the unknown key itself.
    pub pointer: String,
    pub key: String,
    pub known: &'static [&'static str],
    /// Why the key went, when it is one of [`REMOVED`].
    pub removed: Option<&'static str>,
}

/// Every key in `root` that the loader does not know, in the order of
/// [`sections`].
pub fn unknown_keys(root: &Value) -> Vec<UnknownKey> {
    let mut out = Vec::new();
    for (path, known) in sections() {
        let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
        let mut objects = Vec::new();
        at(root, String::new(), &segments, &mut objects);
        for (pointer, v) in objects {
            for (key, _) in v.as_object().into_iter().flatten() {
                if known.contains(&key.as_str()) {
                    continue;
                }
                let dotted = match path {
                    "" => key.clone(),
                    _ => format!("{path}.{key}"),
                };
                let removed = REMOVED
                    .iter()
                    .find(|(p, _)| *p == dotted)
                    .map(|(_, why)| *why);
                out.push(UnknownKey {
                    pointer: format!("{pointer}/{}", esc(key)),
                    key: key.clone(),
                    known,
                    removed,
                });
            }
        }
    }
    out
}

/// The values at `segments` below `v` (at `pointer`), `*` taking every
/// entry of an object or item of an array.
fn at<'v>(v: &'v Value, pointer: String, segments: &[&str], out: &mut Vec<(String, &'v Value)>) {
    let Some((first, rest)) = segments.split_first() else {
        out.push((pointer, v));
        return;
    };
    match (*first, v) {
        ("*", Value::Object(m)) => {
            for (k, child) in m {
                at(child, format!("{pointer}/{}", esc(k)), rest, out);
            }
        }
        ("*", Value::Array(items)) => {
            for (i, child) in items.iter().enumerate() {
                at(child, format!("{pointer}/{i}"), rest, out);
            }
        }
        (name, _) => {
            if let Some(child) = v.get(name) {
                at(child, format!("{pointer}/{}", esc(name)), rest, out);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_are_found_everywhere() {
        let v: Value = serde_json::json!({
            "serverz": 1,
            "server": {"listen": "127.0.0.1:1", "tokn": "x", "spinMicros": 250},
            "mcpServers": {"fs": {"command": "x", "argz": [], "env": {"ANY": "1"},
                                  "tools": {"t": {"resumeUncertian": "skip"}}}},
            "taskEngine": {"retention": {"maxAge": 1}},
            "replay": {"ignore": {"path": []}},
            "retry": {"strategies": {"TIMEOUT": {"delayMs": 1}}},
            "safety": {"rules": [{"tool": "x", "matches": {}}]},
            "views": {"v": {"tool": [], "rename": {"a__b": {"nam": "c"}}}},
            "clients": {"c": {"tokenfile": "x", "views": ["v"]}}
        });
        let got: Vec<(String, bool)> = unknown_keys(&v)
            .into_iter()
            .map(|u| (u.pointer, u.removed.is_some()))
            .collect();
        let want = [
            "/serverz",
            "/server/spinMicros",
            "/server/tokn",
            "/mcpServers/fs/argz",
            "/mcpServers/fs/tools/t/resumeUncertian",
            "/taskEngine/retention/maxAge",
            "/replay/ignore/path",
            "/retry/strategies/TIMEOUT/delayMs",
            "/safety/rules/0/matches",
            "/views/v/tool",
            "/views/v/rename/a__b/nam",
            "/clients/c/tokenfile",
        ];
        let want: Vec<(String, bool)> = want
            .iter()
            .map(|p| (p.to_string(), p.ends_with("spinMicros")))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn removed_keys_are_not_accepted_any_more() {
        for (path, _) in REMOVED {
            let (section, key) = path.rsplit_once('.').unwrap_or(("", path));
            let known = sections().into_iter().find(|(p, _)| *p == section);
            assert!(known.is_some_and(|(_, k)| !k.contains(&key)), "{path}");
        }
    }
}
