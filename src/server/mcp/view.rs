//! `/mcp/<view>`: the gate (`gated`) puts the view a request may use into
//! its extensions; `tools/list` lists the view's tools under the view's
//! names and `tools/call` carries the view into the call pipeline, which
//! refuses a tool outside it (`hub::views`).

use std::sync::Arc;

use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::RoleServer;
use serde_json::{json, Value};

use crate::hub::Hub;
use crate::mcp::registry::ToolInfo;

/// The view a request was let in for (absent: the aggregate).
#[derive(Clone, Debug)]
pub struct McpView(pub Arc<str>);

/// The view of a request at `/mcp/<view>`.
pub fn of(cx: &RequestContext<RoleServer>) -> Option<Arc<str>> {
    cx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<McpView>())
        .map(|v| v.0.clone())
}

/// The client of `clients` a request was let in as (absent: the main
/// token).
#[derive(Clone, Debug)]
pub struct McpClient(pub Arc<str>);

/// The client of an `/mcp` request's token, from the gate.
pub fn client_of(parts: &axum::http::request::Parts) -> Option<Arc<str>> {
    parts.extensions.get::<McpClient>().map(|c| c.0.clone())
}

/// The client of an `/mcp` request's token (absent: the main token).
pub fn token_client(cx: &RequestContext<RoleServer>) -> Option<Arc<str>> {
    cx.extensions
        .get::<axum::http::request::Parts>()
        .and_then(client_of)
}

/// Who made an `/mcp` request: its token's client, its view, its MCP
/// session (`session`: the `mcp-…` id, or the stateless request's own).
pub fn caller_of(cx: &RequestContext<RoleServer>, session: &str) -> crate::caller::Caller {
    crate::caller::Caller {
        client: token_client(cx),
        view: of(cx),
        session: session.into(),
    }
}

/// The view named by a request path: `/mcp/<view>` (and nothing for `/mcp`).
pub fn in_path(path: &str) -> Option<&str> {
    path.strip_prefix("/mcp/").filter(|v| !v.is_empty())
}

/// The tools a view lists, as MCP tools under the view's names.
pub fn tools(hub: &Hub, view: &str) -> Vec<Tool> {
    match hub.view(view) {
        Ok(v) => v
            .listed()
            .iter()
            .filter_map(|t| mcp_tool(&t.qualified_name, t))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// One tool as MCP lists it, under `exposed`.
pub fn mcp_tool(exposed: &str, t: &ToolInfo) -> Option<Tool> {
    let schema = match &t.input_schema {
        v @ Value::Object(_) => v.clone(),
        _ => json!({"type": "object"}),
    };
    let mut v = json!({
        "name": exposed,
        "description": t.description,
        "inputSchema": schema,
    });
    if let Some(a) = &t.annotations {
        v["annotations"] = a.clone();
    }
    // title, outputSchema, icons and _meta as the server listed them.
    if let (Value::Object(m), Ok(Value::Object(extra))) = (&mut v, serde_json::to_value(&t.extra)) {
        m.extend(extra);
    }
    serde_json::from_value(v).ok()
}
