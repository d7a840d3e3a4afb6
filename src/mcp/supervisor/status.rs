//! What a supervised server is in: its state and the status `health_status`
//! and `server_status` show.

use std::time::SystemTime;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Running,
    Restarting,
    CrashLoop,
    Stopped,
    Disabled,
}

/// The wire name (`crash_loop`), for messages a person reads.
impl std::fmt::Display for ServerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ServerState::Starting => "starting",
            ServerState::Running => "running",
            ServerState::Restarting => "restarting",
            ServerState::CrashLoop => "crash_loop",
            ServerState::Stopped => "stopped",
            ServerState::Disabled => "disabled",
        })
    }
}

/// What `health_status` and `server_status` show of a server.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    pub tool_count: usize,
    pub restarts: u32,
    pub last_error: Option<String>,
    pub pid: Option<i32>,
    #[serde(skip)]
    pub up_since: Option<SystemTime>,
    /// The number of the server's current connection (one per start),
    /// so an event about an earlier one is known for what it is.
    #[serde(skip)]
    pub life: u64,
    /// That connection has ended (its process exited, its transport
    /// closed): the state may no longer become `running` for it.
    #[serde(skip)]
    pub gone: bool,
    pub transport: &'static str,
}
