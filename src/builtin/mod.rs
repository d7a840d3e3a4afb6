//! The workspace tools of the internal `hub` server: read_file, write_file,
//! list_directory and run_command, confined to `builtin.workspace`. Mounted
//! by the application behind [`LocalTools`]; the hub's control tools
//! (`hub__tool_batch`, `hub__record_*`, …) live with the application, which
//! knows the services they drive.

pub mod command;
pub mod fs;
pub mod run_path;
pub mod sandbox;

use std::path::Path;
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

/// The workspace, its command runner and the runner's sandbox
/// (`builtin.enabled`), and the current runs' folders for `run:` paths.
pub struct Builtin {
    ws: fs::Workspace,
    runner: command::CommandRunner,
    sandbox: Arc<sandbox::Sandbox>,
    max_read_bytes: usize,
    runs: Option<Arc<dyn sandbox::RunFolder>>,
}

impl Builtin {
    /// `None` when `builtin.enabled` is false. The sandbox's private temp
    /// dir is `<state_dir>/tmp`; `runs` tells it each connection's current
    /// run folder. Logs what the sandbox does on this kernel.
    pub fn new(
        cfg: &BuiltinConfig,
        state_dir: &Path,
        runs: Option<Arc<dyn sandbox::RunFolder>>,
    ) -> std::io::Result<Option<Builtin>> {
        if !cfg.enabled {
            return Ok(None);
        }
        let ws = fs::Workspace::new(&cfg.workspace, cfg.max_read_bytes)?;
        let sandbox = Arc::new(sandbox::Sandbox::new(cfg, ws.root(), state_dir)?);
        let runner = command::CommandRunner::new(
            ws.root().to_path_buf(),
            cfg.command_timeout,
            cfg.max_output_bytes,
        )
        .with_sandbox(sandbox.clone(), runs.clone());
        Ok(Some(Builtin {
            ws,
            runner,
            sandbox,
            max_read_bytes: cfg.max_read_bytes,
            runs,
        }))
    }

    /// The sandbox of `run_command`, for `health_status`.
    pub fn sandbox(&self) -> Arc<sandbox::Sandbox> {
        self.sandbox.clone()
    }

    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        if tool == Tool::RunCommand {
            let placement = self.placement(call)?;
            let v = self
                .runner
                .run_placed(call.params, placement, call.cancel.clone(), call.session)
                .await?;
            // The sandbox's refusal, already in the ToolResult shape.
            if v.get("ok").and_then(Value::as_bool) == Some(false) {
                return Ok(v);
            }
            if let Some(e) = command::exit_error(&v) {
                return Err(self.sandbox.hint(e));
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
            .and_then(|r| r.folder(call.session))
            .map(|dir| run_path::env_of(&dir))
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
            sandbox: crate::config::SandboxMode::WorkspaceWrite,
            sandbox_network: true,
        };
        let b = match Builtin::new(&cfg, dir.path(), None) {
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
