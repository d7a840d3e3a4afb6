//! Talking to MCP servers: `upstream` (one rmcp connection), `supervisor`
//! (one task per server: start, watch, restart), `registry` (the aggregate),
//! `relay` (what servers send for the clients above the hub), `input`
//! (MRTR input requests), `pipes` (a
//! stdio child as rmcp's transport, bounded lines), `ordered` (a call's
//! notifications ahead of its answer).

pub mod children;
pub mod input;
pub mod offline;
pub mod ordered;
pub mod pipes;
pub mod registry;
pub mod relay;
pub mod send;
pub mod supervisor;
pub mod upstream;
