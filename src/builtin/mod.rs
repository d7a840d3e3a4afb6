//! The workspace tools of the internal `hub` server: read_file, write_file,
//! list_directory and run_command, confined to `builtin.workspace`. Mounted
//! by the application behind [`LocalTools`]; the hub's control tools
//! (`hub__tool_batch`, `hub__record_*`, …) live with the application, which
//! knows the services they drive.

pub mod command;
pub mod fs;

use serde_json::Value;

use crate::config::BuiltinConfig;
use crate::errors::HubError;
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

/// The workspace and its command runner (`builtin.enabled`).
pub struct Builtin {
    ws: fs::Workspace,
    runner: command::CommandRunner,
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
        Ok(Some(Builtin { ws, runner }))
    }

    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        let params = call.params;
        match tool {
            Tool::ReadFile => self.ws.read_file(params).await,
            Tool::WriteFile => self.ws.write_file(params).await,
            Tool::ListDirectory => self.ws.list_directory(params).await,
            Tool::RunCommand => {
                let v = self.runner.run(params, call.cancel.clone()).await?;
                if let Some(e) = command::exit_error(&v) {
                    return Err(e);
                }
                Ok(v)
            }
        }
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
