//! `views` and `clients`: which tools a client sees and under which names,
//! and which token opens which views. Parsed and checked here; the hub
//! projects its tool list through a [`ViewSpec`] (`hub::views`) and the
//! gate reads the client tokens (`access`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use serde_json::Value;

use super::ctx::Ctx;
use super::locate::esc;
use super::ConfigError;

/// One view: a subset of the aggregate, under its own names.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ViewSpec {
    pub name: String,
    /// Globs over qualified names; `None`: every tool.
    pub tools: Option<Vec<String>>,
    /// Globs over qualified names taken out after `tools`.
    pub hide: Vec<String>,
    /// Qualified name -> what the view calls it and says of it.
    pub rename: BTreeMap<String, Rename>,
    /// List search/describe/call meta-tools instead of the tools.
    pub discovery: bool,
}

/// A tool's name, description and annotations within one view.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rename {
    pub name: Option<String>,
    pub description: Option<String>,
    /// Merged over the tool's own annotations.
    pub annotations: Option<serde_json::Map<String, Value>>,
}

impl ViewSpec {
    /// Whether the tool with this qualified name belongs to the view.
    pub fn admits(&self, qualified: &str) -> bool {
        let listed = match &self.tools {
            None => true,
            Some(globs) => globs.iter().any(|g| super::glob_match(g, qualified)),
        };
        listed && !self.hide.iter().any(|g| super::glob_match(g, qualified))
    }

    /// Whether the view names tools of `server` (`server__…`), whether or
    /// not the server is up: a view that takes every tool names all; a
    /// glob such as `u__echo` or `u*__*` names the servers its part before
    /// `__` matches. A glob without `__` names none by itself (the tools
    /// it matches now still count where the caller checks them).
    pub fn names_server(&self, server: &str) -> bool {
        match &self.tools {
            None => true,
            Some(globs) => globs.iter().any(|g| {
                g.split_once("__")
                    .is_some_and(|(part, _)| super::glob_match(part, server))
            }),
        }
    }
}

/// A client: its token and the views it may open.
#[derive(Clone, PartialEq)]
pub struct ClientSpec {
    pub name: String,
    pub token: ClientToken,
    pub views: Vec<String>,
}

#[derive(Clone, PartialEq)]
pub enum ClientToken {
    Fixed(String),
    /// Read at every reload (absolute path).
    File(PathBuf),
}

// By hand: a logged config never shows a token.
impl std::fmt::Debug for ClientSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let token = match &self.token {
            ClientToken::Fixed(_) => "<redacted>".to_string(),
            ClientToken::File(p) => format!("file {}", p.display()),
        };
        f.debug_struct("ClientSpec")
            .field("name", &self.name)
            .field("token", &token)
            .field("views", &self.views)
            .finish()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawView {
    pub tools: Option<Vec<String>>,
    pub hide: Option<Vec<String>>,
    pub rename: Option<BTreeMap<String, RawRename>>,
    pub discovery: Option<bool>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawRename {
    pub name: Option<String>,
    pub description: Option<String>,
    pub annotations: Option<serde_json::Map<String, Value>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RawClient {
    pub token: Option<String>,
    pub token_file: Option<String>,
    pub views: Option<Vec<String>>,
}

/// The shortest client token accepted (characters).
pub const MIN_TOKEN_LEN: usize = 16;

/// A view's name is a path segment (`/ws/<view>`, `/mcp/<view>`).
pub fn valid_view_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub(super) fn views(
    ctx: &Ctx,
    raw: BTreeMap<String, RawView>,
) -> Result<BTreeMap<String, ViewSpec>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, r) in raw {
        let p = format!("/views/{}", esc(&name));
        if !valid_view_name(&name) {
            return Err(ctx.err(
                &p,
                format!("view name \"{name}\" is not allowed: expected 1 to 64 letters, digits, '_' or '-' (it is the path segment of /ws/<view> and /mcp/<view>)"),
            ));
        }
        let mut rename = BTreeMap::new();
        let mut given: BTreeMap<String, String> = BTreeMap::new();
        for (tool, rr) in r.rename.unwrap_or_default() {
            let rp = format!("{p}/rename/{}", esc(&tool));
            if tool.contains(['*', '?']) {
                return Err(ctx.err(&rp, format!("views.{name}.rename: \"{tool}\" is a glob; expected one tool's qualified name such as \"playwright__browser_navigate\"")));
            }
            if rr.name.is_none() && rr.description.is_none() && rr.annotations.is_none() {
                return Err(ctx.err(&rp, format!("views.{name}.rename.{tool} changes nothing: expected \"name\", \"description\" and/or \"annotations\"")));
            }
            if let Some(n) = &rr.name {
                if !valid_view_name(n) {
                    return Err(ctx.err(&format!("{rp}/name"), format!("views.{name}.rename.{tool}.name \"{n}\" is not a valid tool name: expected 1 to 64 letters, digits, '_' or '-'")));
                }
                if let Some(other) = given.insert(n.clone(), tool.clone()) {
                    return Err(ctx.err(&format!("{rp}/name"), format!("views.{name}: \"{other}\" and \"{tool}\" are both renamed to \"{n}\"; expected one name per tool")));
                }
            }
            rename.insert(
                tool,
                Rename {
                    name: rr.name,
                    description: rr.description,
                    annotations: rr.annotations,
                },
            );
        }
        let spec = ViewSpec {
            name: name.clone(),
            tools: r.tools,
            hide: r.hide.unwrap_or_default(),
            rename,
            discovery: r.discovery.unwrap_or(false),
        };
        if matches!(&spec.tools, Some(t) if t.is_empty()) {
            return Err(ctx.err(&format!("{p}/tools"), format!("views.{name}.tools is empty, so the view would hold no tool: expected globs over qualified names (\"playwright__*\"), or leave the key out for every tool")));
        }
        out.insert(name, spec);
    }
    Ok(out)
}

pub(super) fn clients(
    ctx: &Ctx,
    raw: BTreeMap<String, RawClient>,
    views: &BTreeMap<String, ViewSpec>,
) -> Result<BTreeMap<String, ClientSpec>, ConfigError> {
    let mut out = BTreeMap::new();
    for (name, r) in raw {
        let p = format!("/clients/{}", esc(&name));
        let token = match (r.token, r.token_file) {
            (Some(_), Some(_)) => {
                return Err(ctx.err(
                    &p,
                    format!(
                        "clients.{name} has both \"token\" and \"tokenFile\": expected one of them"
                    ),
                ));
            }
            (None, None) => {
                return Err(ctx.err(&p, format!("clients.{name} has no token: expected \"token\" (at least {MIN_TOKEN_LEN} characters) or \"tokenFile\" (a file holding one)")));
            }
            (Some(t), None) => {
                if t.trim().chars().count() < MIN_TOKEN_LEN {
                    return Err(ctx.err(&format!("{p}/token"), format!("clients.{name}.token is too short: expected at least {MIN_TOKEN_LEN} characters (a random 32-byte hex string is best)")));
                }
                ClientToken::Fixed(t.trim().to_string())
            }
            (None, Some(f)) => ClientToken::File(ctx.resolve(&f, &format!("{p}/tokenFile"))?),
        };
        let list = r.views.unwrap_or_default();
        if list.is_empty() {
            return Err(ctx.err(&p, format!("clients.{name}.views is missing or empty: expected the names of the views this client may open ({})", known(views))));
        }
        for (i, v) in list.iter().enumerate() {
            if !views.contains_key(v) {
                return Err(ctx.err(&format!("{p}/views/{i}"), format!("clients.{name}.views names \"{v}\", which is not a view: expected one of {}", known(views))));
            }
        }
        out.insert(
            name.clone(),
            ClientSpec {
                name,
                token,
                views: list,
            },
        );
    }
    Ok(out)
}

fn known(views: &BTreeMap<String, ViewSpec>) -> String {
    if views.is_empty() {
        return "no views are defined; add them under \"views\"".into();
    }
    let names: Vec<String> = views.keys().map(|k| format!("\"{k}\"")).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{bad, ok};

    #[test]
    fn a_view_names_the_servers_its_globs_name_whether_up_or_not() {
        let spec = |tools: Option<Vec<&str>>| super::ViewSpec {
            name: "chat".into(),
            tools: tools.map(|t| t.into_iter().map(String::from).collect()),
            hide: Vec::new(),
            rename: std::collections::BTreeMap::new(),
            discovery: false,
        };
        let v = spec(Some(vec!["u__echo", "hub__record_*", "w*__*", "*read*"]));
        assert!(v.names_server("u"));
        assert!(v.names_server("hub"));
        assert!(v.names_server("web"));
        assert!(!v.names_server("t"));
        assert!(!v.names_server("uu"));
        assert!(spec(None).names_server("t"));
    }

    #[test]
    fn views_and_clients_parse() {
        let c = ok(
            r#"{"views": {"chat": {"tools": ["hub__read_file", "t__*"], "hide": ["t__slow"],
            "rename": {"t__echo": {"name": "say", "description": "Say it."}}},
            "agent": {"discovery": true}},
            "clients": {"ext": {"token": "0123456789abcdef0123", "views": ["chat"]}}}"#,
        )
        .config;
        let chat = &c.views["chat"];
        assert!(chat.admits("t__echo") && chat.admits("hub__read_file"));
        assert!(!chat.admits("t__slow") && !chat.admits("hub__write_file"));
        assert_eq!(chat.rename["t__echo"].name.as_deref(), Some("say"));
        assert!(c.views["agent"].discovery && c.views["agent"].admits("anything"));
        assert_eq!(c.clients["ext"].views, vec!["chat"]);
        assert!(!format!("{:?}", c.clients["ext"]).contains("0123456789"));
    }

    #[test]
    fn mistakes_say_what_is_expected() {
        for (text, says) in [
            (r#"{"views": {"a b": {}}}"#, "expected 1 to 64 letters"),
            (r#"{"views": {"v": {"tools": []}}}"#, "would hold no tool"),
            (
                r#"{"views": {"v": {"rename": {"t__*": {"name": "x"}}}}}"#,
                "is a glob",
            ),
            (
                r#"{"views": {"v": {"rename": {"t__a": {}}}}}"#,
                "changes nothing",
            ),
            (
                r#"{"views": {"v": {"rename": {"t__a": {"name": "a.b"}}}}}"#,
                "not a valid tool name",
            ),
            (
                r#"{"views": {"v": {"rename": {"t__a": {"name": "x"}, "t__b": {"name": "x"}}}}}"#,
                "both renamed",
            ),
            (
                r#"{"views": {"v": {}}, "clients": {"c": {"views": ["v"]}}}"#,
                "has no token",
            ),
            (
                r#"{"views": {"v": {}}, "clients": {"c": {"token": "short", "views": ["v"]}}}"#,
                "too short",
            ),
            (
                r#"{"views": {"v": {}}, "clients": {"c": {"token": "0123456789abcdef0", "views": ["w"]}}}"#,
                "expected one of \"v\"",
            ),
            (
                r#"{"views": {"v": {}}, "clients": {"c": {"token": "0123456789abcdef0"}}}"#,
                "views is missing",
            ),
            (
                r#"{"views": {"v": {}}, "clients": {"c": {"token": "0123456789abcdef0", "tokenFile": "x", "views": ["v"]}}}"#,
                "both",
            ),
            (
                r#"{"server": {"token": false}, "views": {"v": {}}, "clients": {"c": {"token": "0123456789abcdef0", "views": ["v"]}}}"#,
                "server.token is false",
            ),
        ] {
            let (_, _, e) = bad(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn unknown_keys_in_a_view_are_warned() {
        let l = ok(r#"{"views": {"v": {"tool": ["x"]}}}"#);
        assert!(
            l.warnings
                .iter()
                .any(|w| w.contains("did you mean \"tools\"")),
            "{:?}",
            l.warnings
        );
    }
}
