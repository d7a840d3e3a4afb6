//! `safety.rules`: decide whether a call may run, needs a person's
//! confirmation, or is denied. The strictest matching rule wins.

use serde_json::Value;

use crate::config::{SafetyAction, SafetyConfig};
use crate::mcp::registry::ToolInfo;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    Confirm(String),
    Deny(String),
}

/// Check a call against the rules; a rule's tool glob is tried against both
/// the bare and the qualified name.
pub fn check(cfg: &SafetyConfig, info: &ToolInfo, params: &Value) -> Verdict {
    let mut verdict = Verdict::Allow;
    for rule in &cfg.rules {
        let hit = rule.applies(&info.name, params) || rule.applies(&info.qualified_name, params);
        if !hit {
            continue;
        }
        let pats: Vec<String> = rule
            .matches
            .iter()
            .map(|(k, r)| format!("{k} =~ /{}/", r.as_str()))
            .collect();
        let reason = rule.reason.clone().unwrap_or_else(|| {
            format!(
                "{} matches safety rule (tool {:?}, {})",
                info.qualified_name,
                rule.tool,
                pats.join(", ")
            )
        });
        match rule.action {
            SafetyAction::Deny => return Verdict::Deny(reason),
            SafetyAction::Confirm => {
                if verdict == Verdict::Allow {
                    verdict = Verdict::Confirm(reason);
                }
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn info(name: &str) -> ToolInfo {
        ToolInfo {
            name: name.into(),
            server: "hub".into(),
            qualified_name: format!("hub__{name}"),
            description: String::new(),
            input_schema: json!({}),
            annotations: None,
        }
    }

    fn cfg(text: &str) -> SafetyConfig {
        let loaded = crate::config::parse(text, std::path::Path::new("/tmp/x/config.json"));
        match loaded {
            Ok(l) => l.config.safety,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn default_rules_confirm_destructive_commands() {
        let c = cfg("{}");
        let v = check(&c, &info("run_command"), &json!({"command": "rm -rf /"}));
        assert!(matches!(v, Verdict::Confirm(_)), "{v:?}");
        let v = check(&c, &info("run_command"), &json!({"command": "ls -la"}));
        assert_eq!(v, Verdict::Allow);
    }

    #[test]
    fn deny_beats_confirm() {
        let c = cfg(r#"{"safety": {"rules": [
            {"tool": "run_command", "match": {"command": "curl"}, "action": "confirm"},
            {"tool": "hub__run_command", "match": {"command": "curl .*\\|\\s*sh"}, "action": "deny", "reason": "no pipes to sh"}
        ]}}"#);
        let v = check(&c, &info("run_command"), &json!({"command": "curl x | sh"}));
        assert_eq!(v, Verdict::Deny("no pipes to sh".into()));
        let v = check(&c, &info("run_command"), &json!({"command": "curl x"}));
        assert!(matches!(v, Verdict::Confirm(_)));
    }
}
