//! Tool views (`views` in config.json): each a subset of the aggregate
//! under its own names. A [`ViewTools`] is the projection of one tool
//! snapshot through one [`ViewSpec`]: the tools it lists (renamed and
//! re-described where asked), how a name typed in the view resolves (bare
//! names, ambiguity and did-you-mean judged among the view's tools only),
//! and the map back to the real tool. The pipeline (`pipeline`) judges
//! every call that carries a view here, so no caller can step around it.
//!
//! Projections are cached per (snapshot, config): a reload or a changed
//! tool list makes the next look-up project again.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::Hub;
use crate::config::views::ViewSpec;
use crate::config::Config;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::{ToolInfo, ToolSnapshot};

/// The meta-tools a `discovery` view lists instead of its tools.
pub const DISCOVERY_TOOLS: [&str; 3] =
    ["hub__search_tools", "hub__describe_tool", "hub__call_tool"];

/// One view over one snapshot.
#[derive(Debug)]
pub struct ViewTools {
    pub name: String,
    pub discovery: bool,
    /// The view's tools under the view's names.
    snap: ToolSnapshot,
    /// The view's qualified name -> the real tool.
    real: HashMap<String, Arc<ToolInfo>>,
    /// The real qualified name -> the view's name.
    shown: HashMap<String, String>,
    /// Renames that could not be applied, for health and the log.
    pub problems: Vec<String>,
}

impl ViewTools {
    /// Project `all` through `spec`.
    pub fn project(spec: &ViewSpec, all: &ToolSnapshot) -> ViewTools {
        let mut problems = Vec::new();
        let members: Vec<&Arc<ToolInfo>> = all
            .tools()
            .iter()
            .filter(|t| {
                spec.admits(&t.qualified_name)
                    || (spec.discovery && DISCOVERY_TOOLS.contains(&t.qualified_name.as_str()))
            })
            .collect();
        let taken: std::collections::HashSet<&str> =
            members.iter().map(|t| t.qualified_name.as_str()).collect();
        let mut presented = Vec::with_capacity(members.len());
        let mut real = HashMap::new();
        let mut shown = HashMap::new();
        for t in members {
            let mut p = ToolInfo::clone(t);
            if let Some(r) = spec.rename.get(&t.qualified_name) {
                if let Some(n) = &r.name {
                    if n != &t.qualified_name && taken.contains(n.as_str()) {
                        problems.push(format!(
                            "views.{}: \"{}\" is not renamed to \"{n}\", which another tool of the view is called",
                            spec.name, t.qualified_name
                        ));
                    } else {
                        p.name = n.clone();
                        p.qualified_name = n.clone();
                    }
                }
                if let Some(d) = &r.description {
                    p.description = d.clone();
                }
                if let Some(a) = &r.annotations {
                    let mut merged = match p.annotations.take() {
                        Some(Value::Object(m)) => m,
                        _ => serde_json::Map::new(),
                    };
                    merged.extend(a.clone());
                    p.annotations = Some(Value::Object(merged));
                }
            }
            shown.insert(t.qualified_name.clone(), p.qualified_name.clone());
            real.insert(p.qualified_name.clone(), t.clone());
            presented.push(Arc::new(p));
        }
        for name in spec.rename.keys() {
            if !shown.contains_key(name) {
                problems.push(format!(
                    "views.{}.rename names \"{name}\", which is not a tool of the view now",
                    spec.name
                ));
            }
        }
        // Servers down or disabled explain a miss only in a view that
        // takes every tool (else they would name servers it hides).
        let unavailable = match &spec.tools {
            None => all.unavailable().clone(),
            Some(_) => BTreeMap::new(),
        };
        ViewTools {
            name: spec.name.clone(),
            discovery: spec.discovery,
            snap: ToolSnapshot::of_named(presented, all.builtin_server(), unavailable),
            real,
            shown,
            problems,
        }
    }

    /// The view's tools as a snapshot (a batch is validated against it).
    pub fn snapshot(&self) -> &ToolSnapshot {
        &self.snap
    }

    /// Every tool of the view under its view name, sorted.
    pub fn tools(&self) -> &[Arc<ToolInfo>] {
        self.snap.tools()
    }

    /// What the view lists: its tools, or the meta-tools in discovery.
    pub fn listed(&self) -> Vec<Arc<ToolInfo>> {
        if !self.discovery {
            return self.snap.tools().to_vec();
        }
        self.snap
            .tools()
            .iter()
            .filter(|t| DISCOVERY_TOOLS.contains(&t.qualified_name.as_str()))
            .cloned()
            .collect()
    }

    /// A discovery view's tools as names only, for a prompt that must stay
    /// small: `{"name","server"}` each; `None` for a view that lists its
    /// tools whole.
    pub fn catalog(&self) -> Option<Vec<Value>> {
        self.discovery.then(|| {
            self.snap
                .tools()
                .iter()
                .filter(|t| !DISCOVERY_TOOLS.contains(&t.qualified_name.as_str()))
                .map(|t| json!({"name": t.qualified_name, "server": t.server}))
                .collect()
        })
    }

    /// The hash of what the view lists.
    pub fn hash(&self) -> String {
        if self.discovery {
            crate::mcp::registry::ToolSnapshot::of_named(self.listed(), "", BTreeMap::new())
                .hash()
                .to_string()
        } else {
            self.snap.hash().to_string()
        }
    }

    /// The real tool a name typed in the view means: a view name (or a
    /// bare one unique in the view), or a member's real qualified name.
    pub fn resolve(&self, name: &str) -> Result<Arc<ToolInfo>, HubError> {
        match self.snap.resolve(name) {
            Ok(p) => self
                .real
                .get(&p.qualified_name)
                .cloned()
                .ok_or_else(|| self.unknown(name)),
            Err(e) => match self.shown.get(name).and_then(|v| self.real.get(v)) {
                Some(t) => Ok(t.clone()),
                None => Err(self.in_view(e)),
            },
        }
    }

    /// The view's name for a real tool, or `None` when it is not in the view.
    pub fn shown(&self, real: &str) -> Option<&str> {
        self.shown.get(real).map(String::as_str)
    }

    /// The real qualified name of a tool the view renamed, by the view's
    /// name; `None` when the view keeps the real name.
    pub fn real_name(&self, view_name: &str) -> Option<&str> {
        let real = self.real.get(view_name)?;
        (real.qualified_name != view_name).then_some(real.qualified_name.as_str())
    }

    /// The view's own entry for a tool (renamed, re-described), by the
    /// view's name.
    pub fn presented(&self, view_name: &str) -> Option<&Arc<ToolInfo>> {
        self.snap.get(view_name)
    }

    /// The error for a real tool the view does not hold.
    pub fn unknown(&self, name: &str) -> HubError {
        HubError::new(
            ErrorType::ToolNotFound,
            format!("no tool named \"{name}\" in view \"{}\"", self.name),
        )
        .with_suggestion(format!(
            "call list_tools to see the {} tools of view \"{}\"",
            self.snap.len(),
            self.name
        ))
        .with_tool(name)
    }

    /// A resolution error, told as the view's.
    fn in_view(&self, mut e: HubError) -> HubError {
        if e.error_type == ErrorType::ToolNotFound {
            e.message = format!("{} in view \"{}\"", e.message, self.name);
        }
        e
    }

    /// `health_status.views[]` entry.
    pub fn summary(&self) -> Value {
        json!({
            "name": self.name,
            "toolCount": self.snap.len(),
            "listed": self.listed().len(),
            "discovery": self.discovery,
            "hash": self.hash(),
            "problems": self.problems,
        })
    }
}

/// The projections of one (snapshot, config) pair.
#[derive(Default)]
pub(super) struct ViewCache(Mutex<Option<Projected>>);

struct Projected {
    snap: Arc<ToolSnapshot>,
    config: Arc<Config>,
    views: Arc<BTreeMap<String, Arc<ViewTools>>>,
}

impl Hub {
    /// Every view over the tools and config in force now.
    pub fn views(&self) -> Arc<BTreeMap<String, Arc<ViewTools>>> {
        let (snap, config) = (self.tools(), self.config());
        let mut slot = match self.view_cache.0.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(p) = slot.as_ref() {
            if Arc::ptr_eq(&p.snap, &snap) && Arc::ptr_eq(&p.config, &config) {
                return p.views.clone();
            }
        }
        let views: BTreeMap<String, Arc<ViewTools>> = config
            .views
            .iter()
            .map(|(n, spec)| (n.clone(), Arc::new(ViewTools::project(spec, &snap))))
            .collect();
        let views = Arc::new(views);
        *slot = Some(Projected {
            snap,
            config,
            views: views.clone(),
        });
        views
    }

    /// `{"tools", "hash"}` of the aggregate (`None`) or of a view, as
    /// `list_tools` answers; a view no longer configured lists nothing.
    pub fn listing(&self, view: Option<&str>) -> Value {
        match view {
            None => {
                let t = self.tools();
                let trusted = self.trusted_servers(t.tools());
                json!({"tools": t.tools(), "hash": t.hash(), "trustedServers": trusted})
            }
            Some(v) => match self.view(v) {
                Ok(v) => {
                    // A renamed tool says what it really is (`realTool`), as
                    // its results do: a client judging a call by the tool
                    // (the extension's consent) must know a renamed
                    // `hub__tool_batch` for what it is.
                    let mut tools = serde_json::to_value(v.listed()).unwrap_or_default();
                    for t in tools.as_array_mut().into_iter().flatten() {
                        let name = t["qualifiedName"].as_str().unwrap_or_default().to_string();
                        if let Some(real) = v.real_name(&name) {
                            t["realTool"] = json!(real);
                        }
                    }
                    let trusted = self.trusted_servers(v.tools());
                    let mut l = json!({"tools": tools, "hash": v.hash(), "view": v.name, "trustedServers": trusted});
                    if let Some(c) = v.catalog() {
                        l["catalog"] = Value::Array(c);
                    }
                    l
                }
                Err(_) => json!({"tools": [], "hash": "", "view": v}),
            },
        }
    }

    /// `trustedServers` of a tool listing: of the servers of `tools`, those
    /// whose annotations a client may act on without asking the person
    /// (`mcpServers.<name>.trusted`), and the hub's own built-ins always.
    pub fn trusted_servers(&self, tools: &[Arc<ToolInfo>]) -> Vec<String> {
        let config = self.config();
        let mut out: Vec<String> = tools
            .iter()
            .map(|t| t.server.as_str())
            .filter(|s| {
                *s == super::BUILTIN_SERVER
                    || config.mcp_servers.get(*s).is_some_and(|spec| spec.trusted)
            })
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// A view's own `tools_updated` after a hub event, when what the view
    /// lists differs from `last_hash` (which it updates).
    pub fn view_update(&self, view: &str, reason: &Value, last_hash: &mut String) -> Option<Value> {
        let now = self.listing(Some(view));
        let hash = now["hash"].as_str().unwrap_or_default().to_string();
        if &hash == last_hash {
            return None;
        }
        *last_hash = hash;
        let mut msg = now;
        msg["type"] = json!("tools_updated");
        msg["reason"] = reason.clone();
        Some(msg)
    }

    /// Log what a config reload or a tool change did to each view.
    pub fn report_views(&self, before: &BTreeMap<String, Arc<ViewTools>>, reason: &str) {
        let after = self.views();
        for (name, v) in after.iter() {
            let names = |v: &ViewTools| -> std::collections::BTreeSet<String> {
                v.tools().iter().map(|t| t.qualified_name.clone()).collect()
            };
            let now = names(v);
            match before.get(name) {
                None => {
                    tracing::info!(view = %name, reason, tools = now.len(), discovery = v.discovery, "view added")
                }
                Some(old) => {
                    let was = names(old);
                    let added: Vec<&String> = now.difference(&was).collect();
                    let removed: Vec<&String> = was.difference(&now).collect();
                    if !added.is_empty() || !removed.is_empty() || old.discovery != v.discovery {
                        tracing::info!(view = %name, reason, tools = now.len(), ?added, ?removed,
                            discovery = v.discovery, "view changed");
                    }
                }
            }
            for p in &v.problems {
                tracing::warn!(view = %name, "{p}");
            }
        }
        for name in before.keys().filter(|n| !after.contains_key(*n)) {
            tracing::info!(view = %name, reason, "view removed: its sessions hold no tool now");
        }
    }

    /// One view now; a view no longer configured holds no tool.
    pub fn view(&self, name: &str) -> Result<Arc<ViewTools>, HubError> {
        self.views().get(name).cloned().ok_or_else(|| {
            HubError::new(
                ErrorType::ToolNotFound,
                format!("view \"{name}\" is not configured any more, so it holds no tool"),
            )
            .with_suggestion("add the view to \"views\" in config.json again, or reconnect to a view that exists")
        })
    }
}

#[cfg(test)]
mod tests;
