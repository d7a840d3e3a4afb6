//! The names tools and prompts have at `/mcp`: the qualified `server__name`
//! always, or with `server.mcpBareNames` the server's own name where no
//! other tool (or prompt) has it and it is no other's qualified name. Pure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::mcp::registry::{is_valid_qualified_name, ToolSnapshot};

/// The exposed name of each item, given its bare and qualified names.
pub fn exposed_names(items: &[(&str, &str)], bare: bool) -> Vec<String> {
    if !bare {
        return items.iter().map(|(_, q)| q.to_string()).collect();
    }
    let mut count: HashMap<&str, usize> = HashMap::new();
    for (b, _) in items {
        *count.entry(b).or_default() += 1;
    }
    let qualified: HashSet<&str> = items.iter().map(|(_, q)| *q).collect();
    items
        .iter()
        .map(|(b, q)| {
            let unique = count.get(b) == Some(&1) && !qualified.contains(b);
            if unique && is_valid_qualified_name(b) {
                b.to_string()
            } else {
                q.to_string()
            }
        })
        .collect()
}

/// The tool list as `/mcp` shows it, for one snapshot.
pub struct ToolNames {
    /// The snapshot's hash, to know when to rebuild.
    pub hash: String,
    /// Exposed name -> qualified name, in exposed-name order.
    pub by_exposed: BTreeMap<String, String>,
    /// Qualified name -> exposed name.
    pub by_qualified: HashMap<String, String>,
}

impl ToolNames {
    pub fn build(snapshot: &ToolSnapshot, bare: bool) -> ToolNames {
        let items: Vec<(&str, &str)> = snapshot
            .tools()
            .iter()
            .map(|t| (t.name.as_str(), t.qualified_name.as_str()))
            .collect();
        let exposed = exposed_names(&items, bare);
        let mut by_exposed = BTreeMap::new();
        let mut by_qualified = HashMap::new();
        for ((_, q), e) in items.iter().zip(exposed) {
            by_exposed.insert(e.clone(), q.to_string());
            by_qualified.insert(q.to_string(), e);
        }
        ToolNames {
            hash: snapshot.hash().to_string(),
            by_exposed,
            by_qualified,
        }
    }

    /// The name to hand the call path: the qualified name of an exposed
    /// one; anything else as given (the call path resolves qualified and
    /// unique bare names and explains the rest).
    pub fn to_call(&self, name: &str) -> String {
        self.by_exposed
            .get(name)
            .cloned()
            .unwrap_or_else(|| name.to_string())
    }
}

/// One cached [`ToolNames`], rebuilt when the snapshot changes.
#[derive(Default)]
pub struct NameCache(std::sync::Mutex<Option<Arc<ToolNames>>>);

impl NameCache {
    pub fn get(&self, snapshot: &ToolSnapshot, bare: bool) -> Arc<ToolNames> {
        let mut slot = match self.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        match slot.as_ref() {
            Some(n) if n.hash == snapshot.hash() => n.clone(),
            _ => {
                let n = Arc::new(ToolNames::build(snapshot, bare));
                *slot = Some(n.clone());
                n
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_unless_bare_names_are_asked_for() {
        let items = [("echo", "a__echo"), ("read", "b__read")];
        assert_eq!(exposed_names(&items, false), vec!["a__echo", "b__read"]);
        assert_eq!(exposed_names(&items, true), vec!["echo", "read"]);
    }

    #[test]
    fn shared_and_clashing_bare_names_stay_qualified() {
        let items = [
            ("echo", "a__echo"),
            ("echo", "b__echo"),
            ("x__y", "s__x__y"), // its bare name is another's qualified name
            ("y", "x__y"),
            ("bad.name", "c__bad_name_1a2b"),
        ];
        assert_eq!(
            exposed_names(&items, true),
            vec!["a__echo", "b__echo", "s__x__y", "y", "c__bad_name_1a2b"]
        );
    }
}
