//! Talking to MCP servers: `upstream` (one rmcp connection), `supervisor`
//! (one task per server: start, watch, restart), `registry` (the aggregate),
//! `relay` (what servers send for the clients above the hub), `lane` (plain
//! `tools/call`s on a stdio server, beside rmcp's service loop).

pub mod call;
pub mod children;
pub mod lane;
pub mod offline;
pub mod ordered;
pub mod registry;
pub mod relay;
pub mod supervisor;
pub mod upstream;
