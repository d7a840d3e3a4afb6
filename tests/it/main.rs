//! One integration-test binary: each module drives the real `toolhub`
//! binary over a real WebSocket against real MCP servers.

mod support;

mod batch;
mod durable;
mod faults;
mod gate;
mod lifecycle;
mod mcp;
mod playwright;
mod protocol;
mod recording;
mod reload;
mod safety;
mod servers;
mod spawn;
mod threats;
mod tools;
