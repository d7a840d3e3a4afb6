//! Tool pinning against rug pulls: the first definition seen of each
//! qualified name (or the last one approved) is its pin. A tool whose
//! definition (description, schema, annotations) later differs from its pin
//! is "changed": `health_status` lists it, and with `security.pinTools` the
//! call path refuses it until `{"type":"reload_tools","approve":true}`.
//!
//! Pins survive a tool's removal, so removing and re-adding a tool with a
//! new definition (or a server restart that lists different tools) is
//! caught too. Pins are kept in `<stateDir>/tool_pins.json` (rewritten
//! atomically when they change), so a definition that changes while the hub
//! is down is caught after a restart as well.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use dashmap::DashSet;

use super::Hub;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::{ToolInfo, ToolSnapshot};

/// The request that approves every current definition.
pub const APPROVE_MSG: &str = r#"{"type":"reload_tools","approve":true}"#;

#[derive(Default)]
pub struct Pins {
    /// Where pins are kept across restarts (`None`: memory only).
    file: Option<PathBuf>,
    /// Approved definition per qualified name. Taken only while rebuilding
    /// or approving, never on the call path.
    approved: Mutex<HashMap<String, ToolInfo>>,
    /// Qualified names whose current definition differs from the pin; read
    /// on the call path (a sharded set, no lock held across `.await`).
    changed: DashSet<String>,
}

impl Pins {
    /// Pins kept in `file`; a missing file starts empty, an unreadable one is
    /// reported and starts empty (the hub never refuses to start over it).
    pub fn load(file: &Path) -> Pins {
        let approved = match std::fs::read(file) {
            Ok(bytes) => match serde_json::from_slice::<HashMap<String, ToolInfo>>(&bytes) {
                Ok(map) => map,
                Err(e) => {
                    tracing::error!(path = %file.display(), error = %e, "tool pins unreadable; starting with none");
                    HashMap::new()
                }
            },
            Err(_) => HashMap::new(),
        };
        Pins {
            file: Some(file.to_path_buf()),
            approved: Mutex::new(approved),
            changed: DashSet::new(),
        }
    }

    /// Rewrite the pin file (temp file, then rename): never half-written.
    fn save(&self, approved: &HashMap<String, ToolInfo>) {
        let Some(file) = &self.file else { return };
        let text = match serde_json::to_vec(approved) {
            Ok(t) => t,
            Err(_) => return,
        };
        let tmp = file.with_extension("json.tmp");
        let r =
            crate::store::private::write(&tmp, &text).and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = r {
            tracing::warn!(path = %file.display(), error = %e, "cannot save tool pins");
        }
    }

    /// Compare a new snapshot with the pins; returns names that just became
    /// changed. Called under the hub's rebuild lock.
    pub fn observe(&self, snapshot: &ToolSnapshot) -> Vec<String> {
        let mut newly = Vec::new();
        let Ok(mut approved) = self.approved.lock() else {
            return newly;
        };
        let mut pinned_new = false;
        for t in snapshot.tools() {
            match approved.get(&t.qualified_name) {
                None => {
                    approved.insert(t.qualified_name.clone(), ToolInfo::clone(t));
                    pinned_new = true;
                }
                Some(pin) if pin != t.as_ref() => {
                    if self.changed.insert(t.qualified_name.clone()) {
                        newly.push(t.qualified_name.clone());
                    }
                }
                Some(_) => {
                    // Back to the approved definition.
                    self.changed.remove(&t.qualified_name);
                }
            }
        }
        if pinned_new {
            self.save(&approved);
        }
        newly
    }

    /// Accept every definition in `snapshot` as the new pin.
    pub fn approve(&self, snapshot: &ToolSnapshot) -> Vec<String> {
        if let Ok(mut approved) = self.approved.lock() {
            for t in snapshot.tools() {
                approved.insert(t.qualified_name.clone(), ToolInfo::clone(t));
            }
            self.save(&approved);
        }
        let mut was: Vec<String> = self.changed.iter().map(|n| n.clone()).collect();
        self.changed.clear();
        was.sort();
        was
    }

    pub fn is_changed(&self, qualified: &str) -> bool {
        self.changed.contains(qualified)
    }

    /// Sorted, for `health_status`.
    pub fn changed(&self) -> Vec<String> {
        let mut v: Vec<String> = self.changed.iter().map(|n| n.clone()).collect();
        v.sort();
        v
    }
}

impl Hub {
    /// With `security.pinTools`, a changed and not yet approved tool is
    /// refused before any attempt reaches its server.
    /// The suggestion says how to approve to the main token, and to a
    /// client (`by_client`), which may not approve, to ask the person.
    pub(crate) fn pin_check(&self, tool: &ToolInfo, by_client: bool) -> Result<(), HubError> {
        if !self.config().security.pin_tools || !self.pins.is_changed(&tool.qualified_name) {
            return Ok(());
        }
        Err(HubError::new(
            ErrorType::SafetyBlocked,
            format!(
                "the definition of tool {} changed since it was approved (security.pinTools); it is refused until a person reviews and approves the new definition",
                tool.qualified_name
            ),
        )
        .with_suggestion(if by_client {
            "ask the person who runs the hub to review the tool's new definition and approve it (the dashboard's Servers page, or reload_tools with approve from the main token); a client token may not approve".to_string()
        } else {
            format!(
                "review the tool's new description and schema (list_tools), then approve every current definition with {APPROVE_MSG}"
            )
        })
        .with_tool(&tool.qualified_name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::registry::RawTool;
    use serde_json::json;

    fn snap(desc: &str) -> ToolSnapshot {
        let raw = RawTool {
            name: "x".into(),
            description: Some(desc.into()),
            input_schema: json!({"type": "object"}),
            annotations: None,
            extra: Default::default(),
        };
        ToolSnapshot::build(vec![("s".to_string(), vec![raw])], "hub")
    }

    #[test]
    fn first_sight_pins_a_change_is_flagged_until_approved() {
        let p = Pins::default();
        assert!(p.observe(&snap("a")).is_empty());
        assert_eq!(p.observe(&snap("b")), vec!["s__x".to_string()]);
        assert!(p.is_changed("s__x"));
        assert!(p.observe(&snap("b")).is_empty(), "reported once");
        assert_eq!(p.approve(&snap("b")), vec!["s__x".to_string()]);
        assert!(!p.is_changed("s__x"));
        // Removed and re-added with another definition: still caught.
        let empty = ToolSnapshot::build(Vec::<(String, Vec<RawTool>)>::new(), "hub");
        p.observe(&empty);
        assert_eq!(p.observe(&snap("c")), vec!["s__x".to_string()]);
        // Changed back to the approved definition: no longer flagged.
        p.observe(&snap("b"));
        assert!(!p.is_changed("s__x"));
    }

    #[test]
    fn pins_survive_a_restart() {
        let dir = std::env::temp_dir().join(format!("toolhub-pins-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let file = dir.join("tool_pins.json");
        let _ = std::fs::remove_file(&file);
        let first = Pins::load(&file);
        assert!(first.observe(&snap("a")).is_empty());
        drop(first);
        let again = Pins::load(&file);
        assert_eq!(
            again.observe(&snap("evil")),
            vec!["s__x".to_string()],
            "a change while down is caught"
        );
        std::fs::write(&file, b"{not json").unwrap_or(());
        assert!(
            Pins::load(&file).observe(&snap("a")).is_empty(),
            "a bad file starts empty"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
