//! A virtual MCP server backed by a recording (`mcpServers.NAME:
//! {"recording": "<id or folder>"}`): it offers the recorded tools and
//! answers calls from the recording, matched per tool in recorded order, so
//! flows can run with no real servers.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Mutex;

use serde_json::Value;

use crate::errors::{ErrorType, HubError};
use crate::mcp::registry::RawTool;
use crate::store::recordings::{self as store, format::Recording};

pub struct Offline {
    pub recording_id: String,
    rec: Recording,
    /// Bare tool name → indices of its recorded steps, in order.
    by_tool: BTreeMap<String, Vec<usize>>,
    /// Bare tool name → how many of its steps were answered.
    cursor: Mutex<HashMap<String, usize>>,
}

fn bare(qualified: &str) -> &str {
    qualified
        .split_once("__")
        .map(|(_, t)| t)
        .unwrap_or(qualified)
}

impl Offline {
    /// `source` is a recording id (under `storage`) or a path to a
    /// recording folder.
    pub fn load(source: &str, storage: &Path) -> Result<Offline, String> {
        let (storage, id) = if store::valid_id(source) {
            (storage.to_path_buf(), source.to_string())
        } else {
            let p = Path::new(source);
            let p = if p.file_name().is_some_and(|n| n == store::FILE) {
                p.parent().unwrap_or(p)
            } else {
                p
            };
            let id = p
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string();
            (p.parent().map(Path::to_path_buf).unwrap_or_default(), id)
        };
        let mut rec = store::load(&storage, &id).map_err(|e| e.message)?;
        store::inline_files(&storage, &mut rec);
        let mut by_tool: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, s) in rec.steps.iter().enumerate() {
            let q = s.qualified_name.clone().unwrap_or_else(|| s.tool.clone());
            by_tool.entry(bare(&q).to_string()).or_default().push(i);
        }
        Ok(Offline {
            recording_id: id,
            rec,
            by_tool,
            cursor: Mutex::new(HashMap::new()),
        })
    }

    /// The recorded tools, with the definitions recorded in the header.
    pub fn tools(&self) -> Vec<RawTool> {
        self.by_tool
            .iter()
            .map(|(name, steps)| {
                let first = &self.rec.steps[steps[0]];
                let q = first
                    .qualified_name
                    .clone()
                    .unwrap_or_else(|| first.tool.clone());
                let def = self
                    .rec
                    .header
                    .tools
                    .iter()
                    .find(|t| t["qualifiedName"] == q.as_str());
                RawTool {
                    name: name.clone(),
                    description: Some(format!(
                        "{} (answered from recording {})",
                        def.and_then(|d| d["description"].as_str())
                            .unwrap_or("recorded tool"),
                        self.recording_id
                    )),
                    input_schema: def
                        .map(|d| d["inputSchema"].clone())
                        .filter(Value::is_object)
                        .unwrap_or_else(|| serde_json::json!({"type": "object"})),
                    annotations: def.and_then(|d| d.get("annotations").cloned()),
                    extra: def
                        .and_then(|d| serde_json::from_value(d.clone()).ok())
                        .unwrap_or_default(),
                }
            })
            .collect()
    }

    /// Answer a call from the next recorded step of that tool.
    pub fn call(&self, tool: &str, params: &Value) -> Result<Value, HubError> {
        let Some(steps) = self.by_tool.get(tool) else {
            return Err(HubError::new(
                ErrorType::ToolNotFound,
                format!("recording {} has no calls of {tool}", self.recording_id),
            ));
        };
        let mut cursor = self
            .cursor
            .lock()
            .map_err(|_| HubError::new(ErrorType::Unknown, "offline cursor poisoned"))?;
        let at = cursor.entry(tool.to_string()).or_insert(0);
        if let Some(&i) = steps.get(*at) {
            let s = &self.rec.steps[i];
            if matches(&s.params, params) {
                *at += 1;
                return match (&s.success, &s.error) {
                    (true, _) => Ok(s.result.clone()),
                    (false, Some(e)) => Err(e.clone()),
                    (false, None) => Err(HubError::new(
                        ErrorType::Unknown,
                        "the recorded call failed",
                    )),
                };
            }
        }
        let candidates: Vec<(usize, &Value)> = steps
            .iter()
            .map(|&i| (i, &self.rec.steps[i].params))
            .collect();
        let hint = match crate::diff::nearest(params, &candidates) {
            Some((i, fields)) => format!(
                "; the nearest recorded call is step {i}, which differs in {}",
                fields.join(", ")
            ),
            None => String::new(),
        };
        Err(HubError::new(
            ErrorType::NotFound,
            format!(
                "no recorded call of {tool} matches these params at this point (call {} of {} recorded){hint}",
                *at + 1,
                steps.len()
            ),
        )
        .with_suggestion("send the params the recording expects, or record the flow again"))
    }
}

/// Recorded params match when equal, a redacted secret matching anything.
fn matches(recorded: &Value, actual: &Value) -> bool {
    match (recorded, actual) {
        (Value::Object(r), _) if r.len() == 1 && r.contains_key("$redacted") => true,
        (Value::Object(r), Value::Object(a)) => {
            r.len() == a.len()
                && r.iter()
                    .all(|(k, v)| a.get(k).is_some_and(|x| matches(v, x)))
        }
        (Value::Array(r), Value::Array(a)) => {
            r.len() == a.len() && r.iter().zip(a).all(|(x, y)| matches(x, y))
        }
        _ => recorded == actual,
    }
}
