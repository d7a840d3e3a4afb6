//! What `/mcp/<view>` serves beyond tools: resources, resource templates,
//! prompts and completion come only from the servers that have a tool in
//! the view ([`ViewServers`]). Lists leave the others' items out; a read,
//! a subscription, a prompt or a completion of another server's item is
//! answered exactly as for an item that does not exist, so a view learns
//! nothing of what it does not hold. The aggregate (`/mcp`) serves every
//! server's.

use std::collections::BTreeSet;

use rmcp::ErrorData;

use crate::caller::Caller;
use crate::hub::Hub;

/// The servers a request may reach for resources, templates, prompts and
/// completion (`None`: every server, the aggregate).
pub struct ViewServers(Option<BTreeSet<String>>);

impl ViewServers {
    /// For `caller`: its view's servers (a view no longer configured holds
    /// none), or all in the aggregate.
    pub fn of(hub: &Hub, caller: &Caller) -> ViewServers {
        let Some(view) = &caller.view else {
            return ViewServers(None);
        };
        let servers = match hub.view(view) {
            Ok(v) => v.tools().iter().map(|t| t.server.clone()).collect(),
            Err(_) => BTreeSet::new(),
        };
        ViewServers(Some(servers))
    }

    pub fn admits(&self, server: &str) -> bool {
        self.0.as_ref().is_none_or(|s| s.contains(server))
    }

    /// The items of admitted servers, from a `(server, item)` list.
    pub fn keep<T>(&self, all: Vec<(String, T)>) -> Vec<T> {
        all.into_iter()
            .filter(|(s, _)| self.admits(s))
            .map(|(_, t)| t)
            .collect()
    }

    /// The server of resource `uri`, when admitted; else the error for a
    /// resource that does not exist.
    pub async fn resource_server(&self, hub: &Hub, uri: &str) -> Result<String, ErrorData> {
        let server = hub.resource_server(uri).await?;
        if self.admits(&server) {
            Ok(server)
        } else {
            Err(crate::hub::aggregate::no_resource(uri))
        }
    }

    /// `(server, its own name)` of prompt `exposed` when admitted; else the
    /// error for a prompt that does not exist.
    pub fn prompt(
        &self,
        exposed: &str,
        route: (String, String),
    ) -> Result<(String, String), ErrorData> {
        if self.admits(&route.0) {
            Ok(route)
        } else {
            Err(super::no_prompt(exposed))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_keeps_its_servers_items_and_the_aggregate_all() {
        let view = ViewServers(Some(["a".to_string()].into()));
        let all = vec![("a".to_string(), 1), ("b".to_string(), 2)];
        assert_eq!(view.keep(all.clone()), vec![1]);
        assert_eq!(ViewServers(None).keep(all), vec![1, 2]);
        assert!(view.admits("a") && !view.admits("b"));
        let refused = view.prompt("b__p", ("b".into(), "p".into())).err();
        let unknown = super::super::no_prompt("b__p");
        assert_eq!(refused.map(|e| e.message), Some(unknown.message));
    }
}
