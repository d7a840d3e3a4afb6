//! The workspace tools of the internal `hub` server: read_file, write_file,
//! list_directory and run_command, confined to `builtin.workspace`. Mounted
//! by the application behind [`LocalTools`]; the hub's control tools
//! (`hub__tool_batch`, `hub__record_*`, …) live with the application, which
//! knows the services they drive.

pub mod command;
pub mod fs;
pub mod run_path;

use std::sync::Arc;

use serde_json::Value;

use crate::config::BuiltinConfig;
use crate::errors::{ErrorType, HubError};
use crate::hub::local::{LocalCall, LocalFuture, LocalTools};
use crate::mcp::registry::RawTool;

/// Every workspace tool; dispatch is on this enum, not on strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tool {
    ReadFile,
    WriteFile,
    ListDirectory,
    RunCommand,
}

impl Tool {
    const ALL: [Tool; 4] = [
        Tool::ReadFile,
        Tool::WriteFile,
        Tool::ListDirectory,
        Tool::RunCommand,
    ];

    fn name(self) -> &'static str {
        match self {
            Tool::ReadFile => "read_file",
            Tool::WriteFile => "write_file",
            Tool::ListDirectory => "list_directory",
            Tool::RunCommand => "run_command",
        }
    }

    fn from_name(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The workspace and its command runner (`builtin.enabled`), and the
/// current runs' folders for `run:` paths.
pub struct Builtin {
    ws: fs::Workspace,
    runner: command::CommandRunner,
    max_read_bytes: usize,
    runs: Option<Arc<dyn run_path::RunFolders>>,
}

impl Builtin {
    /// `None` when `builtin.enabled` is false.
    pub fn new(cfg: &BuiltinConfig) -> std::io::Result<Option<Builtin>> {
        if !cfg.enabled {
            return Ok(None);
        }
        let ws = fs::Workspace::new(&cfg.workspace, cfg.max_read_bytes)?;
        let runner = command::CommandRunner::new(
            ws.root().to_path_buf(),
            cfg.command_timeout,
            cfg.max_output_bytes,
        );
        Ok(Some(Builtin {
            ws,
            runner,
            max_read_bytes: cfg.max_read_bytes,
            runs: None,
        }))
    }

    /// Let `run:` paths name the calling session's current run.
    pub fn with_run_folders(mut self, runs: Arc<dyn run_path::RunFolders>) -> Builtin {
        self.runs = Some(runs);
        self
    }

    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        if tool == Tool::RunCommand {
            let placement = self.placement(call)?;
            let v = self
                .runner
                .run_placed(call.params, placement, call.cancel.clone())
                .await?;
            if let Some(e) = command::exit_error(&v) {
                return Err(e);
            }
            return Ok(v);
        }
        let user_path = call.params.get("path").and_then(Value::as_str);
        let Some(after) = user_path.and_then(run_path::strip) else {
            return self.file_tool(tool, &self.ws, call.params).await;
        };
        // A `run:` path: the same tool, confined to the run's folder.
        let rp = run_path::resolve(self.runs.as_deref(), call.session, after, false)?;
        let ws = fs::Workspace::new(&rp.root, self.max_read_bytes).map_err(|e| {
            HubError::new(
                ErrorType::NotFound,
                format!("{} cannot be used: {e}", rp.shown),
            )
        })?;
        let mut params = call.params.clone();
        params["path"] = Value::String(rp.rest.clone());
        let mut v = self.file_tool(tool, &ws, &params).await?;
        if let Some(p) = v.get("path").and_then(Value::as_str) {
            v["path"] = Value::String(rp.show(p));
        }
        Ok(v)
    }

    async fn file_tool(
        &self,
        tool: Tool,
        ws: &fs::Workspace,
        params: &Value,
    ) -> Result<Value, HubError> {
        match tool {
            Tool::ReadFile => ws.read_file(params).await,
            Tool::WriteFile => ws.write_file(params).await,
            Tool::ListDirectory => ws.list_directory(params).await,
            Tool::RunCommand => Err(HubError::new(
                ErrorType::Unknown,
                "run_command is not a file tool",
            )),
        }
    }

    /// A `run:` cwd resolved and confined, and the current run's
    /// `TOOLHUB_RUN_*` variables (none when no run is current).
    fn placement(&self, call: LocalCall<'_>) -> Result<command::Placement, HubError> {
        let cwd = match call
            .params
            .get("cwd")
            .and_then(Value::as_str)
            .and_then(run_path::strip)
        {
            None => None,
            Some(after) => {
                let rp = run_path::resolve(self.runs.as_deref(), call.session, after, true)?;
                let dir = fs::resolve_under(&rp.root, &rp.rest, "cwd")?;
                if !dir.is_dir() {
                    return Err(HubError::new(
                        ErrorType::NotFound,
                        format!("cwd '{}' is not a folder", rp.show(&rp.rest)),
                    )
                    .with_suggestion(
                        "create it first (write_file creates folders), or leave cwd out",
                    ));
                }
                Some(dir)
            }
        };
        let env = self
            .runs
            .as_ref()
            .and_then(|r| r.folder(call.session).ok())
            .map(|f| run_path::env_of(&f).to_vec())
            .unwrap_or_default();
        Ok(command::Placement { cwd, env })
    }
}

impl LocalTools for Builtin {
    fn tools(&self) -> Vec<RawTool> {
        fs::tool_definitions()
            .into_iter()
            .map(|(name, description, schema)| RawTool {
                name: name.to_string(),
                description: Some(description.to_string()),
                input_schema: schema,
                annotations: None,
            })
            .collect()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        let tool = Tool::from_name(tool)?;
        Some(Box::pin(self.run(tool, call)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_workspace_tool_is_dispatchable() {
        let dir = tempfile::tempdir().expect("dir");
        let cfg = BuiltinConfig {
            enabled: true,
            workspace: dir.path().to_path_buf(),
            command_timeout: std::time::Duration::from_secs(1),
            max_output_bytes: 1024,
            max_read_bytes: 1024,
        };
        let b = match Builtin::new(&cfg) {
            Ok(Some(b)) => b,
            Ok(None) => panic!("enabled"),
            Err(e) => panic!("{e}"),
        };
        let tools = b.tools();
        assert_eq!(tools.len(), 4);
        for t in &tools {
            assert!(
                Tool::from_name(&t.name).is_some(),
                "{} is listed but not callable",
                t.name
            );
        }
    }
}
