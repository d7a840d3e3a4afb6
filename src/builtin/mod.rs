//! The workspace tools of the internal `hub` server: read_file, write_file,
//! list_directory and run_command, confined to `builtin.workspace`. Mounted
//! by the application behind [`LocalTools`]; the hub's control tools
//! (`hub__tool_batch`, `hub__record_*`, …) live with the application, which
//! knows the services they drive.

pub mod command;
pub mod fs;
pub mod run_path;
pub mod sandbox;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde_json::{json, Value};

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

    /// Honest MCP `ToolAnnotations`: what a client may assume of the tool
    /// (the extension runs a `readOnlyHint` tool without asking).
    fn annotations(self) -> Value {
        match self {
            Tool::ReadFile | Tool::ListDirectory => json!({
                "readOnlyHint": true,
                "idempotentHint": true,
                "openWorldHint": false,
            }),
            Tool::WriteFile => json!({
                "readOnlyHint": false,
                "destructiveHint": true,
                "idempotentHint": true,
                "openWorldHint": false,
            }),
            Tool::RunCommand => json!({
                "readOnlyHint": false,
                "destructiveHint": true,
                "idempotentHint": false,
                "openWorldHint": true,
            }),
        }
    }
}

/// The workspace tools, reconfigured on a config reload: `builtin.*`
/// applies to the next call (a call already running keeps the settings it
/// started with); with `builtin.enabled` false they are not listed.
/// `run:` paths reach the calling session's current run (`run_path`).
pub struct Builtin {
    active: RwLock<InForce>,
    /// For the sandbox's private temp dir (`<stateDir>/tmp`).
    state_dir: PathBuf,
    /// Each connection's current run folder, writable by its commands.
    runs: Option<Arc<dyn sandbox::RunFolder>>,
}

/// The settings in force and, when enabled, the tools built from them.
struct InForce {
    cfg: BuiltinConfig,
    tools: Option<Arc<Workspace>>,
}

/// The workspace and its command runner.
struct Workspace {
    ws: fs::Workspace,
    runner: command::CommandRunner,
    sandbox: Arc<sandbox::Sandbox>,
    max_read_bytes: usize,
    runs: Option<Arc<dyn sandbox::RunFolder>>,
}

impl Builtin {
    /// Fails when the workspace folder cannot be created. The sandbox's
    /// private temp dir is `<state_dir>/tmp`; `runs` tells it each
    /// connection's current run folder. Logs what the sandbox does on this
    /// kernel.
    pub fn new(
        cfg: &BuiltinConfig,
        state_dir: &Path,
        runs: Option<Arc<dyn sandbox::RunFolder>>,
    ) -> std::io::Result<Builtin> {
        Ok(Builtin {
            active: RwLock::new(InForce {
                cfg: cfg.clone(),
                tools: Workspace::new(cfg, state_dir, &runs)?.map(Arc::new),
            }),
            state_dir: state_dir.to_path_buf(),
            runs,
        })
    }

    /// The sandbox of `run_command` in force (when the workspace tools are
    /// on), for `health_status`.
    pub fn sandbox(&self) -> Option<Arc<sandbox::Sandbox>> {
        self.current().map(|w| w.sandbox.clone())
    }

    fn current(&self) -> Option<Arc<Workspace>> {
        match self.active.read() {
            Ok(a) => a.tools.clone(),
            Err(poisoned) => poisoned.into_inner().tools.clone(),
        }
    }

    /// Apply new `builtin` settings; on a workspace that cannot be created
    /// the old settings stay (logged).
    fn apply(&self, cfg: &BuiltinConfig) {
        let same = match self.active.read() {
            Ok(a) => a.cfg == *cfg,
            Err(poisoned) => poisoned.into_inner().cfg == *cfg,
        };
        if same {
            return;
        }
        let tools = match Workspace::new(cfg, &self.state_dir, &self.runs) {
            Ok(t) => t.map(Arc::new),
            Err(e) => {
                tracing::error!(workspace = %cfg.workspace.display(), error = %e,
                    "builtin settings not applied: cannot use the workspace; the previous builtin settings stay in force");
                return;
            }
        };
        tracing::info!(enabled = cfg.enabled, workspace = %cfg.workspace.display(),
            "builtin settings applied (the next call uses them)");
        let next = InForce {
            cfg: cfg.clone(),
            tools,
        };
        match self.active.write() {
            Ok(mut a) => *a = next,
            Err(poisoned) => *poisoned.into_inner() = next,
        }
    }
}

impl Workspace {
    /// `None` when `builtin.enabled` is false.
    fn new(
        cfg: &BuiltinConfig,
        state_dir: &Path,
        runs: &Option<Arc<dyn sandbox::RunFolder>>,
    ) -> std::io::Result<Option<Workspace>> {
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
        .with_sandbox(sandbox.clone(), runs.clone())
        .with_env(&cfg.command_env);
        Ok(Some(Workspace {
            ws,
            runner,
            sandbox,
            max_read_bytes: cfg.max_read_bytes,
            runs: runs.clone(),
        }))
    }

    async fn run(&self, tool: Tool, call: LocalCall<'_>) -> Result<Value, HubError> {
        let who = (call.session, call.client);
        if tool == Tool::RunCommand {
            let placement = self.placement(call)?;
            let v = self
                .runner
                .run_placed(call.params, placement, call.cancel.clone(), who)
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
        let rp = run_path::resolve(self.runs.as_deref(), who, after, false)?;
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
                let who = (call.session, call.client);
                let rp = run_path::resolve(self.runs.as_deref(), who, after, true)?;
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
            .and_then(|r| r.folder(call.session, call.client))
            .map(|dir| run_path::env_of(&dir))
            .unwrap_or_default();
        Ok(command::Placement { cwd, env })
    }
}

impl LocalTools for Builtin {
    fn tools(&self) -> Vec<RawTool> {
        if self.current().is_none() {
            return Vec::new();
        }
        fs::tool_definitions()
            .into_iter()
            .map(|(name, description, schema)| RawTool {
                name: name.to_string(),
                description: Some(description.to_string()),
                input_schema: schema,
                annotations: Tool::from_name(name).map(Tool::annotations),
                extra: Default::default(),
            })
            .collect()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        let tool = Tool::from_name(tool)?;
        let ws = self.current()?;
        Some(Box::pin(async move { ws.run(tool, call).await }))
    }

    fn reconfigure(&self, config: &crate::config::Config) {
        self.apply(&config.builtin);
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
            sandbox_deny_read: Vec::new(),
            sandbox_allow_read: Vec::new(),
            command_env: Vec::new(),
            config_file: PathBuf::from("/cfg/config.json"),
        };
        let b = match Builtin::new(&cfg, dir.path(), None) {
            Ok(b) => b,
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
            let a = t.annotations.as_ref().expect("annotations");
            let read_only = matches!(t.name.as_str(), "read_file" | "list_directory");
            assert_eq!(a["readOnlyHint"], read_only, "{}", t.name);
            assert_eq!(a["destructiveHint"].as_bool(), (!read_only).then_some(true));
        }
    }
}

#[cfg(test)]
mod reload_tests {
    use super::*;

    #[test]
    fn disabling_and_enabling_the_builtin_tools_takes_effect_without_a_restart() {
        let dir = tempfile::tempdir().expect("dir");
        let mut cfg = BuiltinConfig {
            enabled: true,
            workspace: dir.path().join("ws"),
            command_timeout: std::time::Duration::from_secs(1),
            max_output_bytes: 1024,
            max_read_bytes: 1024,
            sandbox: crate::config::SandboxMode::WorkspaceWrite,
            sandbox_network: true,
            sandbox_deny_read: Vec::new(),
            sandbox_allow_read: Vec::new(),
            command_env: Vec::new(),
            config_file: PathBuf::from("/cfg/config.json"),
        };
        let b = Builtin::new(&cfg, dir.path(), None).expect("builtin");
        assert_eq!(b.tools().len(), 4);
        cfg.enabled = false;
        b.apply(&cfg);
        assert!(b.tools().is_empty());
        cfg.enabled = true;
        cfg.workspace = dir.path().join("other");
        b.apply(&cfg);
        assert_eq!(b.tools().len(), 4);
        assert!(dir.path().join("other").is_dir());
    }
}
