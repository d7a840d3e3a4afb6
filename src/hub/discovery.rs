//! Progressive discovery: the meta-tools a view with `"discovery": true`
//! lists instead of its tools (`hub::views::DISCOVERY_TOOLS`), so a client
//! with a small context pays for three tool definitions, not for every
//! server's. `hub__search_tools` ranks the caller's tools by the words of
//! a query (names weigh more than descriptions), `hub__describe_tool` gives
//! one tool's full definition, and `hub__call_tool` calls one through the
//! call pipeline in the caller's view, so the view is enforced there as on
//! any call: a tool outside it can be neither found, described nor called.
//! Outside a view they work over the whole aggregate.

use std::sync::Arc;

use serde_json::{json, Value};

use super::local::{LocalCall, LocalFuture, LocalTools};
use super::pipeline::Approval;
use super::views::DISCOVERY_TOOLS;
use super::Hub;
use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::{RawTool, ToolInfo};
use crate::outcome::CallRequest;

/// Results `hub__search_tools` returns by default, and at most.
const DEFAULT_LIMIT: usize = 10;
const MAX_LIMIT: usize = 50;
/// A description in a search result is cut to this many characters.
const SNIPPET: usize = 160;

/// The three meta-tools over the hub's tool list.
pub struct Discovery {
    hub: Hub,
}

impl Discovery {
    pub fn new(hub: Hub) -> Arc<Discovery> {
        Arc::new(Discovery { hub })
    }

    /// The caller's tools under the names it knows them by (the view's, or
    /// the aggregate's), the meta-tools left out.
    fn tools_of(&self, view: Option<&str>) -> Result<Vec<Arc<ToolInfo>>, HubError> {
        let all = match view {
            Some(v) => self.hub.view(v)?.tools().to_vec(),
            None => self.hub.tools().tools().to_vec(),
        };
        Ok(all
            .into_iter()
            .filter(|t| !is_meta(&t.qualified_name))
            .collect())
    }

    /// One tool by a name the caller may use, as the caller knows it.
    fn find(&self, view: Option<&str>, name: &str) -> Result<Arc<ToolInfo>, HubError> {
        let found = match view {
            Some(v) => {
                let v = self.hub.view(v)?;
                let real = v.resolve(name)?;
                v.shown(&real.qualified_name)
                    .and_then(|n| v.presented(n))
                    .cloned()
                    .ok_or_else(|| v.unknown(name))?
            }
            None => self.hub.tools().resolve(name)?.clone(),
        };
        if is_meta(&found.qualified_name) {
            return Err(meta_refused(&found.qualified_name));
        }
        Ok(found)
    }

    fn search(&self, call: &LocalCall<'_>) -> Result<Value, HubError> {
        let query = str_param(call.params, "query")?;
        let limit = match call.params.get("limit") {
            None | Some(Value::Null) => DEFAULT_LIMIT,
            Some(v) => v.as_u64().filter(|n| *n >= 1).ok_or_else(|| {
                HubError::new(
                    ErrorType::InvalidParams,
                    format!("limit must be a whole number from 1 to {MAX_LIMIT}"),
                )
            })? as usize,
        }
        .min(MAX_LIMIT);
        let tools = self.tools_of(call.view)?;
        let ranked = rank(&tools, query);
        let total = ranked.len();
        let hits: Vec<Value> = ranked
            .into_iter()
            .take(limit)
            .map(|(t, score)| {
                json!({"name": t.qualified_name, "description": snippet(&t.description), "score": score})
            })
            .collect();
        Ok(json!({"query": query, "tools": hits, "total": total, "of": tools.len()}))
    }

    fn describe(&self, call: &LocalCall<'_>) -> Result<Value, HubError> {
        let t = self.find(call.view, str_param(call.params, "name")?)?;
        let mut v = json!({
            "name": t.qualified_name,
            "description": t.description,
            "inputSchema": t.input_schema,
        });
        if let Some(a) = &t.annotations {
            v["annotations"] = a.clone();
        }
        Ok(v)
    }

    async fn call_tool(&self, call: LocalCall<'_>) -> Result<Value, HubError> {
        let name = str_param(call.params, "name")?;
        // Judged here too, so a meta-tool never calls itself; the pipeline
        // judges the view again on what it resolves.
        self.find(call.view, name)?;
        let args = match call.params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(a @ Value::Object(_)) => a.clone(),
            Some(_) => {
                return Err(HubError::new(
                    ErrorType::InvalidParams,
                    "arguments must be an object of the tool's parameters",
                )
                .with_suggestion("read the tool's inputSchema with hub__describe_tool"))
            }
        };
        let mut req = CallRequest::new(
            name.to_string(),
            args,
            call.session.into(),
            call.cancel.clone(),
        );
        req.context = call.context.clone();
        req.view = call.view.map(Arc::from);
        req.client = call.client.map(Arc::from);
        // A confirm rule refuses (nobody to ask inside a tool call); deny
        // rules and the view apply as on any call.
        let out = self.hub.call(&req, Approval::Helper, |r| r).await;
        match out.error {
            Some(e) if !out.success => Err(e),
            _ => Ok(out.result),
        }
    }
}

fn is_meta(name: &str) -> bool {
    DISCOVERY_TOOLS.contains(&name)
}

fn meta_refused(name: &str) -> HubError {
    HubError::new(
        ErrorType::InvalidParams,
        format!("{name} is a discovery tool itself; name one of the tools hub__search_tools finds"),
    )
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, HubError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| {
            HubError::new(
                ErrorType::InvalidParams,
                format!("missing field \"{key}\" (a non-empty string)"),
            )
        })
}

/// The words of a text, lower case, split on anything but letters and digits.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The tools that match at least one word of `query`, best first: a word
/// in the name counts 3 (4 when it is a whole word of the name), one in
/// the description 1 (2 when whole); ties by name.
pub fn rank<'a>(tools: &'a [Arc<ToolInfo>], query: &str) -> Vec<(&'a Arc<ToolInfo>, u32)> {
    let q = words(query);
    let mut out: Vec<(&Arc<ToolInfo>, u32)> = tools
        .iter()
        .filter_map(|t| {
            let name = t.qualified_name.to_lowercase();
            let name_words = words(&t.qualified_name.replace('_', " "));
            let desc = t.description.to_lowercase();
            let desc_words = words(&t.description);
            let score: u32 = q
                .iter()
                .map(|w| {
                    let in_name = if name_words.contains(w) {
                        4
                    } else if name.contains(w.as_str()) {
                        3
                    } else {
                        0
                    };
                    let in_desc = if desc_words.contains(w) {
                        2
                    } else if desc.contains(w.as_str()) {
                        1
                    } else {
                        0
                    };
                    in_name + in_desc
                })
                .sum();
            (score > 0).then_some((t, score))
        })
        .collect();
    out.sort_by(|a, b| {
        b.1.cmp(&a.1)
            .then_with(|| a.0.qualified_name.cmp(&b.0.qualified_name))
    });
    out
}

fn snippet(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    if first.chars().count() <= SNIPPET {
        return first.to_string();
    }
    let cut: String = first.chars().take(SNIPPET).collect();
    format!("{cut}…")
}

impl LocalTools for Discovery {
    fn tools(&self) -> Vec<RawTool> {
        let read_only = Some(json!({"readOnlyHint": true}));
        let tool =
            |name: &str, description: &str, schema: Value, annotations: Option<Value>| RawTool {
                name: name.to_string(),
                description: Some(description.to_string()),
                input_schema: schema,
                annotations,
                extra: Default::default(),
            };
        vec![
            tool(
                "search_tools",
                "Find tools by words from their names and descriptions, best match first (name and a one-line description each). Then hub__describe_tool for one tool's parameters, and hub__call_tool to call it.",
                json!({"type": "object", "required": ["query"], "properties": {
                    "query": {"type": "string", "description": "words such as \"read file\" or \"navigate page\""},
                    "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "results to return (default 10)"}}}),
                read_only.clone(),
            ),
            tool(
                "describe_tool",
                "One tool's full definition: description, inputSchema (its parameters) and annotations.",
                json!({"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string", "description": "a name hub__search_tools returned"}}}),
                read_only,
            ),
            tool(
                "call_tool",
                "Call a tool by name with its arguments (as hub__describe_tool's inputSchema says); returns the tool's result.",
                json!({"type": "object", "required": ["name"], "properties": {
                    "name": {"type": "string"},
                    "arguments": {"type": "object", "description": "the tool's parameters"}}}),
                Some(json!({"destructiveHint": true})),
            ),
        ]
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        match tool {
            "search_tools" => Some(Box::pin(async move { self.search(&call) })),
            "describe_tool" => Some(Box::pin(async move { self.describe(&call) })),
            "call_tool" => Some(Box::pin(self.call_tool(call))),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::registry::ToolSnapshot;

    fn raw(name: &str, description: &str) -> RawTool {
        RawTool {
            name: name.into(),
            description: Some(description.into()),
            input_schema: json!({"type": "object"}),
            annotations: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn search_ranks_names_over_descriptions_and_drops_misses() {
        let snap = ToolSnapshot::build(
            vec![(
                "pw".to_string(),
                vec![
                    raw("browser_navigate", "Open a URL in the page."),
                    raw("browser_click", "Click an element; the page may navigate."),
                    raw("browser_close", "Close the page."),
                ],
            )],
            "hub",
        );
        let found: Vec<(String, u32)> = rank(snap.tools(), "navigate")
            .into_iter()
            .map(|(t, s)| (t.qualified_name.clone(), s))
            .collect();
        assert_eq!(
            found,
            [
                ("pw__browser_navigate".to_string(), 4),
                ("pw__browser_click".to_string(), 2)
            ]
        );
        assert!(rank(snap.tools(), "screenshot").is_empty());
        let by_desc = rank(snap.tools(), "URL");
        assert_eq!(by_desc[0].0.qualified_name, "pw__browser_navigate");
    }

    #[test]
    fn a_long_description_is_cut_to_its_first_line() {
        assert_eq!(snippet("one\ntwo"), "one");
        let long = "x".repeat(500);
        assert_eq!(snippet(&long).chars().count(), SNIPPET + 1);
    }
}
