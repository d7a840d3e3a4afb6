//! The aggregated tool list of the hub: every server's tools under one
//! qualified name each, how a name a client typed resolves to one tool, the
//! hash clients compare, and the diff sent with `tools_updated`.
//!
//! A [`ToolSnapshot`] is immutable. The hub builds a new one whenever any
//! server's tool list changes and swaps an `Arc` to it, so the call path reads
//! a snapshot without taking a lock. Pure data: no IO, no clock.

mod names;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::errors::{ErrorType, HubError};
use crate::suggest::did_you_mean;

pub use names::{assign_qualified_names, is_valid_qualified_name, MAX_QUALIFIED_LEN};

/// A tool as a server listed it (the part of MCP `Tool` the hub keeps).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RawTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: Value,
    pub annotations: Option<Value>,
    /// What else the server said of the tool, passed on as it is.
    pub extra: ToolExtra,
}

/// The parts of an MCP `Tool` the hub does not interpret but passes on
/// unchanged (`/mcp` `tools/list`, `/ws` `list_tools`): its `title`,
/// `outputSchema`, `icons` and `_meta`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExtra {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Value>,
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// One tool of the aggregated list, as `list_tools` sends it.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolInfo {
    /// The tool's own name at its server, exactly as the server listed it.
    pub name: String,
    pub server: String,
    /// `server__tool`, or a sanitised form of it with a hash suffix; always
    /// matches `^[A-Za-z0-9_-]{1,64}$`.
    pub qualified_name: String,
    pub description: String,
    pub input_schema: Value,
    /// MCP `ToolAnnotations` JSON (`readOnlyHint`, `destructiveHint`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// `title`, `outputSchema`, `icons`, `_meta`, when the server sent them.
    #[serde(flatten)]
    pub extra: ToolExtra,
}

/// What changed between two snapshots, as qualified names, each list sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ToolDiff {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Same qualified name, a different definition (description, inputSchema,
    /// annotations, title, outputSchema, icons or `_meta`).
    pub changed: Vec<String>,
}

impl ToolDiff {
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// A bare name several servers offer: calling it bare fails with
/// `AMBIGUOUS_TOOL`; each of `tools` (qualified names) still works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ambiguity {
    pub name: String,
    pub tools: Vec<String>,
}

impl std::fmt::Display for Ambiguity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "\"{}\" ({})", self.name, self.tools.join(", "))
    }
}

/// The aggregated tool list at one moment. Cheap to share behind an `Arc`.
#[derive(Debug, Clone)]
pub struct ToolSnapshot {
    /// Sorted by qualified name, which makes lookups a binary search.
    tools: Vec<Arc<ToolInfo>>,
    /// Bare tool name -> indexes into `tools`, in qualified-name order.
    by_bare: BTreeMap<String, Vec<usize>>,
    /// server -> original tool name -> index: the exact map back.
    by_pair: BTreeMap<String, BTreeMap<String, usize>>,
    hash: String,
    builtin_server: String,
    /// Servers whose tools are missing on purpose, with the reason:
    /// `"disabled"` or `"down: …"`.
    unavailable: BTreeMap<String, String>,
}

impl ToolSnapshot {
    /// Builds the snapshot from each server's tool list. `builtin_server` is
    /// the hub's own server name (`"hub"`). If a server lists a tool name twice, the
    /// first listing is kept.
    pub fn build(
        servers: impl IntoIterator<Item = (String, Vec<RawTool>)>,
        builtin_server: &str,
    ) -> ToolSnapshot {
        let mut raw: BTreeMap<(String, String), RawTool> = BTreeMap::new();
        for (server, tools) in servers {
            for tool in tools {
                raw.entry((server.clone(), tool.name.clone()))
                    .or_insert(tool);
            }
        }
        let pairs: Vec<(&str, &str)> = raw.keys().map(|(s, t)| (s.as_str(), t.as_str())).collect();
        let qualified = names::assign_qualified_names(&pairs);

        let tools: Vec<Arc<ToolInfo>> = raw
            .into_iter()
            .zip(qualified)
            .map(|(((server, name), tool), qualified_name)| {
                Arc::new(ToolInfo {
                    name,
                    server,
                    qualified_name,
                    description: tool.description.unwrap_or_default(),
                    input_schema: tool.input_schema,
                    annotations: tool.annotations,
                    extra: tool.extra,
                })
            })
            .collect();
        ToolSnapshot::of_named(tools, builtin_server, BTreeMap::new())
    }

    /// A snapshot of tools already named (a view's projection): each
    /// keeps its `qualified_name`, and its `name` is its bare name.
    pub fn of_named(
        mut tools: Vec<Arc<ToolInfo>>,
        builtin_server: &str,
        unavailable: BTreeMap<String, String>,
    ) -> ToolSnapshot {
        tools.sort_by(|a, b| a.qualified_name.cmp(&b.qualified_name));
        tools.dedup_by(|a, b| a.qualified_name == b.qualified_name);
        let mut by_bare: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        let mut by_pair: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
        for (i, t) in tools.iter().enumerate() {
            by_bare.entry(t.name.clone()).or_default().push(i);
            by_pair
                .entry(t.server.clone())
                .or_default()
                .insert(t.name.clone(), i);
        }
        let hash = names::list_hash(&tools);
        ToolSnapshot {
            tools,
            by_bare,
            by_pair,
            hash,
            builtin_server: builtin_server.to_string(),
            unavailable,
        }
    }

    /// A snapshot with no tools (before any server has listed its tools).
    pub fn empty(builtin_server: &str) -> ToolSnapshot {
        ToolSnapshot::build(Vec::new(), builtin_server)
    }

    /// Records servers whose tools are absent on purpose, so that a call to
    /// `server__tool` explains why instead of a bare "not found". The reason
    /// is `"disabled"` or `"down: <why>"`. Does not change the hash.
    pub fn with_unavailable(mut self, servers: BTreeMap<String, String>) -> Self {
        self.unavailable = servers;
        self
    }

    /// Every tool, sorted by qualified name.
    pub fn tools(&self) -> &[Arc<ToolInfo>] {
        &self.tools
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// sha256 (first 16 hex chars) of the canonical JSON of [`Self::tools`]:
    /// equal tool lists give equal hashes whatever order the servers came in.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub fn builtin_server(&self) -> &str {
        &self.builtin_server
    }

    pub fn unavailable(&self) -> &BTreeMap<String, String> {
        &self.unavailable
    }

    /// The tool with exactly this qualified name.
    pub fn get(&self, qualified_name: &str) -> Option<&Arc<ToolInfo>> {
        self.tools
            .binary_search_by(|t| t.qualified_name.as_str().cmp(qualified_name))
            .ok()
            .and_then(|i| self.tools.get(i))
    }

    /// The tool a server lists under `tool` (its own name): the exact map
    /// back from a sanitised qualified name is `ToolInfo::{server, name}`,
    /// and this is the map forward.
    pub fn lookup(&self, server: &str, tool: &str) -> Option<&Arc<ToolInfo>> {
        let i = *self.by_pair.get(server)?.get(tool)?;
        self.tools.get(i)
    }

    /// A server's tools, sorted by qualified name.
    pub fn by_server(&self, server: &str) -> Vec<&Arc<ToolInfo>> {
        self.tools.iter().filter(|t| t.server == server).collect()
    }

    /// Resolves a name a client typed: a qualified name first, then a bare
    /// name. A bare name offered by one server resolves to it; offered by two
    /// or more (the built-in server counts like any other) it is ambiguous,
    /// so a server that arrives with a name the hub already answered never
    /// takes it over silently.
    pub fn resolve(&self, name: &str) -> Result<&Arc<ToolInfo>, HubError> {
        if let Some(tool) = self.get(name) {
            return Ok(tool);
        }
        let candidates: Vec<&Arc<ToolInfo>> = self
            .by_bare
            .get(name)
            .map(|ix| ix.iter().filter_map(|&i| self.tools.get(i)).collect())
            .unwrap_or_default();
        match candidates.as_slice() {
            [only] => Ok(only),
            [] => Err(self.not_found(name)),
            _ => Err(ambiguous(name, &candidates)),
        }
    }

    /// Every bare name two or more servers offer, with its qualified names
    /// (sorted), by bare name.
    pub fn ambiguous(&self) -> Vec<Ambiguity> {
        self.by_bare
            .iter()
            .filter(|(_, ix)| ix.len() > 1)
            .map(|(name, ix)| Ambiguity {
                name: name.clone(),
                tools: ix
                    .iter()
                    .filter_map(|&i| self.tools.get(i))
                    .map(|t| t.qualified_name.clone())
                    .collect(),
            })
            .collect()
    }

    /// The bare names that resolved to one tool here and are ambiguous in
    /// `newer` (a server arrived with the same name), for `tools_updated`.
    pub fn newly_ambiguous(&self, newer: &ToolSnapshot) -> Vec<Ambiguity> {
        newer
            .ambiguous()
            .into_iter()
            .filter(|a| self.by_bare.get(&a.name).is_some_and(|ix| ix.len() == 1))
            .collect()
    }

    /// Compares with a newer snapshot, for `tools_updated`.
    pub fn diff(&self, newer: &ToolSnapshot) -> ToolDiff {
        let mut diff = ToolDiff::default();
        for old in &self.tools {
            match newer.get(&old.qualified_name) {
                None => diff.removed.push(old.qualified_name.clone()),
                Some(new) if new != old => diff.changed.push(old.qualified_name.clone()),
                Some(_) => {}
            }
        }
        for new in &newer.tools {
            if self.get(&new.qualified_name).is_none() {
                diff.added.push(new.qualified_name.clone());
            }
        }
        diff
    }

    /// The error for a name nothing matched, as helpful as we can make it.
    fn not_found(&self, name: &str) -> HubError {
        if let Some(e) = self.separator_typo(name) {
            return e;
        }
        if let Some((server, reason)) = self.unavailable_prefix(name, names::SEPARATOR) {
            return unavailable(name, server, reason);
        }
        let candidates = self
            .by_bare
            .keys()
            .map(String::as_str)
            .chain(self.tools.iter().map(|t| t.qualified_name.as_str()));
        let near = did_you_mean(name, candidates);
        let mut message = format!("no tool named \"{name}\"");
        if !near.is_empty() {
            let quoted: Vec<String> = near.iter().map(|n| format!("\"{n}\"")).collect();
            message.push_str(&format!("; did you mean {}?", quoted.join(", ")));
        }
        HubError::new(ErrorType::ToolNotFound, message)
            .with_suggestion(self.list_tools_hint())
            .with_tool(name)
    }

    /// `server.tool` or `server/tool`, a common way to write a qualified
    /// name that the hub does not use: point at `server__tool`.
    fn separator_typo(&self, name: &str) -> Option<HubError> {
        for sep in [".", "/"] {
            for (i, _) in name.match_indices(sep) {
                let (server, tool) = (&name[..i], &name[i + sep.len()..]);
                if let Some(t) = self.lookup(server, tool) {
                    let q = &t.qualified_name;
                    return Some(
                        HubError::new(
                            ErrorType::ToolNotFound,
                            format!(
                                "no tool named \"{name}\"; qualified names are written \
                                 server__tool, so did you mean \"{q}\"?"
                            ),
                        )
                        .with_suggestion(format!("call it as \"{q}\""))
                        .with_server(server)
                        .with_tool(name),
                    );
                }
            }
            if let Some((server, reason)) = self.unavailable_prefix(name, sep) {
                return Some(unavailable(name, server, reason));
            }
        }
        None
    }

    /// The unavailable server `name` starts with (followed by `sep`); the
    /// longest one, as server names may themselves contain `__`.
    fn unavailable_prefix(&self, name: &str, sep: &str) -> Option<(&str, &str)> {
        self.unavailable
            .iter()
            .filter(|(server, _)| {
                name.strip_prefix(server.as_str())
                    .is_some_and(|rest| rest.starts_with(sep))
            })
            .max_by_key(|(server, _)| server.len())
            .map(|(s, r)| (s.as_str(), r.as_str()))
    }

    fn list_tools_hint(&self) -> String {
        match self.tools.len() {
            0 => "no tools are available; call health_check to see which servers are down"
                .to_string(),
            1 => "call list_tools to see the 1 available tool".to_string(),
            n => format!("call list_tools to see the {n} available tools"),
        }
    }
}

fn ambiguous(name: &str, candidates: &[&Arc<ToolInfo>]) -> HubError {
    let choices: Vec<&str> = candidates
        .iter()
        .map(|t| t.qualified_name.as_str())
        .collect();
    let first = choices.first().copied().unwrap_or_default();
    HubError::new(
        ErrorType::AmbiguousTool,
        format!(
            "tool \"{name}\" is offered by several servers: {}; call it by its qualified name",
            choices.join(", ")
        ),
    )
    .with_suggestion(format!(
        "use one of the qualified names instead, e.g. \"{first}\""
    ))
    .with_tool(name)
}

/// A call to a tool of a server that is disabled or down.
fn unavailable(name: &str, server: &str, reason: &str) -> HubError {
    if reason == "disabled" {
        let message = format!(
            "no tool named \"{name}\": server \"{server}\" is disabled in config.json \
             (set \"disabled\": false to enable it)"
        );
        return HubError::new(ErrorType::ToolNotFound, message)
            .with_suggestion(format!(
                "set \"disabled\": false for server \"{server}\" in config.json to enable it"
            ))
            .with_server(server)
            .with_tool(name);
    }
    let state = if reason.starts_with("down") {
        format!("is {reason}")
    } else {
        format!("is unavailable: {reason}")
    };
    HubError::new(
        ErrorType::ServerUnavailable,
        format!("cannot call \"{name}\": server \"{server}\" {state}"),
    )
    .with_suggestion(format!(
        "retry after server \"{server}\" restarts; call health_check to see its state and last error"
    ))
    .with_server(server)
    .with_tool(name)
}

#[cfg(test)]
mod tests;
