//! The test server's dynamic tools (`add_tool`, `remove_tool`,
//! `change_tool`) and the list-changed notice they send, on whichever
//! channel the client's protocol era uses.

use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::reply::invalid;
use super::tools::{echo_like_tool, Args as ToolArgs};
use super::TestServer;

/// A tool registered at runtime with `add_tool`; `revision` bumps on
/// `change_tool` so its schema changes too, not only its description.
pub struct DynamicTool {
    pub description: String,
    pub revision: u64,
}

impl TestServer {
    pub fn all_tools(&self) -> Vec<Tool> {
        let mut tools = self.fixed.clone();
        if let Ok(dynamic) = self.dynamic.lock() {
            tools.extend(
                dynamic
                    .iter()
                    .map(|(name, d)| echo_like_tool(name, &d.description, d.revision)),
            );
        }
        tools
    }

    pub fn is_dynamic(&self, name: &str) -> bool {
        self.dynamic.lock().is_ok_and(|d| d.contains_key(name))
    }

    /// Tells the client the tool list changed, on whichever channel its
    /// protocol era uses.
    pub async fn notify_list_changed(&self, cx: &RequestContext<RoleServer>) {
        let _ = self.list_changed.send(());
        let legacy = cx.protocol_version().is_none_or(|v| v.has_initialize());
        if legacy {
            if let Err(e) = cx.peer.notify_tool_list_changed().await {
                eprintln!("testserver {} could not send list_changed: {e}", self.name);
            }
        }
    }

    /// Registers, removes or changes a dynamic tool. Returns the text reply.
    pub fn edit_dynamic(&self, tool: &str, args: &ToolArgs<'_>) -> Result<String, ErrorData> {
        let name = args.string("name")?;
        let mut dynamic = self
            .dynamic
            .lock()
            .map_err(|_| ErrorData::internal_error("dynamic tool table poisoned", None))?;
        let fixed = self.fixed.iter().any(|t| t.name == name);
        match tool {
            "add_tool" if fixed || dynamic.contains_key(name) => {
                Err(invalid(format!("tool `{name}` already exists")))
            }
            "add_tool" => {
                let description = args
                    .opt_string("description")?
                    .unwrap_or("A dynamic echo-like tool.");
                dynamic.insert(
                    name.to_owned(),
                    DynamicTool {
                        description: description.to_owned(),
                        revision: 0,
                    },
                );
                Ok(format!("added {name}"))
            }
            "remove_tool" => match dynamic.remove(name) {
                Some(_) => Ok(format!("removed {name}")),
                None => Err(invalid(format!("no dynamic tool named `{name}`"))),
            },
            _ => {
                let description = args.string("description")?;
                let entry = dynamic
                    .get_mut(name)
                    .ok_or_else(|| invalid(format!("no dynamic tool named `{name}`")))?;
                entry.description = description.to_owned();
                entry.revision += 1;
                Ok(format!("changed {name} to revision {}", entry.revision))
            }
        }
    }
}
