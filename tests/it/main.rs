//! One integration-test binary: each module drives the real `toolhub`
//! binary over a real WebSocket against real MCP servers.

mod support;

mod artifacts;
mod assertions;
mod barrier;
mod batch;
mod browser_tabs;
mod caps;
mod contexts;
mod durable;
mod extension;
mod faults;
mod gate;
mod instances;
mod instructions;
mod keep_result;
mod lifecycle;
mod mcp;
mod messages;
mod node_script;
mod once;
mod ordering;
mod pages;
mod playwright;
mod procs;
mod protocol;
mod recording;
mod reload;
mod runs;
mod runs_index;
mod runs_more;
mod safety;
mod sandbox;
mod sandbox_reads;
mod secrets;
mod servers;
mod sessions;
mod spawn;
mod stall;
mod stores;
mod tasks_index;
mod threats;
mod tools;
mod ui;
mod views;
