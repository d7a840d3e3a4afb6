//! Tools that run inside the hub process, behind one small trait.
//!
//! The call path does not know what a local tool is: the workspace tools,
//! the hub's control tools (registered by the application, which knows the
//! engine and the recorder) and a recording-backed offline server all answer
//! through [`LocalTools`]. Several providers may be mounted under one server
//! name (`hub`); the first that knows a tool answers it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::errors::HubError;
use crate::mcp::offline::Offline;
use crate::mcp::registry::RawTool;

/// A boxed future of a local tool's result.
pub type LocalFuture<'a> = Pin<Box<dyn Future<Output = Result<Value, HubError>> + Send + 'a>>;

/// What a local tool may know about the call it serves.
#[derive(Clone, Copy)]
pub struct LocalCall<'a> {
    pub params: &'a Value,
    pub cancel: &'a CancellationToken,
    /// The calling connection's session (`""` for internal calls).
    pub session: &'a str,
}

/// A provider of in-process tools.
pub trait LocalTools: Send + Sync {
    /// The tools it offers now, for the aggregate list.
    fn tools(&self) -> Vec<RawTool>;

    /// Run `tool`, or `None` when this provider does not have it.
    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>>;
}

/// The providers mounted under one server name, in mount order.
#[derive(Clone, Default)]
pub struct Mounted(Vec<Arc<dyn LocalTools>>);

impl Mounted {
    pub fn of(p: Arc<dyn LocalTools>) -> Mounted {
        Mounted(vec![p])
    }

    pub fn push(&mut self, p: Arc<dyn LocalTools>) {
        self.0.push(p);
    }

    pub fn tools(&self) -> Vec<RawTool> {
        self.0.iter().flat_map(|p| p.tools()).collect()
    }

    pub fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        self.0.iter().find_map(|p| p.call(tool, call))
    }
}

/// A recording-backed server answers from its recording, in process.
pub struct OfflineTools(pub Arc<Offline>);

impl LocalTools for OfflineTools {
    fn tools(&self) -> Vec<RawTool> {
        self.0.tools()
    }

    fn call<'a>(&'a self, tool: &'a str, call: LocalCall<'a>) -> Option<LocalFuture<'a>> {
        Some(Box::pin(async move { self.0.call(tool, call.params) }))
    }
}
