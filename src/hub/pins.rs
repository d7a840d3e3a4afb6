//! Tool pinning against rug pulls: the first definition seen of each
//! qualified name (or the last one approved) is its pin. A tool whose
//! definition (description, schema, annotations) later differs from its pin
//! is "changed": `health_status` lists it, and with `security.pinTools` the
//! call path refuses it until `{"type":"reload_tools","approve":true}`.
//!
//! Pins survive a tool's removal, so removing and re-adding a tool with a
//! new definition (or a server restart that lists different tools) is
//! caught too. Pins live in memory: a restarted hub trusts what it sees
//! first.

use std::collections::HashMap;
use std::sync::Mutex;

use dashmap::DashSet;

use super::Hub;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::{ToolInfo, ToolSnapshot};

/// The request that approves every current definition.
pub const APPROVE_MSG: &str = r#"{"type":"reload_tools","approve":true}"#;

#[derive(Default)]
pub struct Pins {
    /// Approved definition per qualified name. Taken only while rebuilding
    /// or approving, never on the call path.
    approved: Mutex<HashMap<String, ToolInfo>>,
    /// Qualified names whose current definition differs from the pin; read
    /// on the call path (a sharded set, no lock held across `.await`).
    changed: DashSet<String>,
}

impl Pins {
    /// Compare a new snapshot with the pins; returns names that just became
    /// changed. Called under the hub's rebuild lock.
    pub fn observe(&self, snapshot: &ToolSnapshot) -> Vec<String> {
        let mut newly = Vec::new();
        let Ok(mut approved) = self.approved.lock() else {
            return newly;
        };
        for t in snapshot.tools() {
            match approved.get(&t.qualified_name) {
                None => {
                    approved.insert(t.qualified_name.clone(), t.clone());
                }
                Some(pin) if pin != t => {
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
        newly
    }

    /// Accept every definition in `snapshot` as the new pin.
    pub fn approve(&self, snapshot: &ToolSnapshot) -> Vec<String> {
        if let Ok(mut approved) = self.approved.lock() {
            for t in snapshot.tools() {
                approved.insert(t.qualified_name.clone(), t.clone());
            }
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
    pub(crate) fn pin_check(&self, tool: &ToolInfo) -> Result<(), HubError> {
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
        .with_suggestion(format!(
            "review the tool's new description and schema (list_tools), then approve every current definition with {APPROVE_MSG}"
        ))
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
}
