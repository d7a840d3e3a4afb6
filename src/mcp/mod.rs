//! Talking to MCP servers: `upstream` (one rmcp connection), `supervisor`
//! (one task per server: start, watch, restart), `registry` (the aggregate).

pub mod children;
pub mod offline;
pub mod registry;
pub mod supervisor;
pub mod upstream;
