//! Observing finished calls: the one hook through which a service above the
//! call layer (the recorder, runs) sees each call of a connection, without the
//! call path or the engine knowing who listens.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use crate::outcome::CallOutcome;
use crate::store::recordings::format::Source;

/// What the runner or the dispatcher knows about a finished call.
#[derive(Clone)]
pub struct Capture<'a> {
    pub source: Source,
    pub params: &'a Value,
    pub params_template: Option<&'a Value>,
    pub save_as: Option<&'a str>,
    pub when: Option<&'a Value>,
    pub expect: Option<&'a Value>,
    /// A batch step's `options.variables` and the names `options.secrets`
    /// marks secret (the recorder keeps the others as replay defaults).
    pub variables: Option<(&'a serde_json::Map<String, Value>, &'a [String])>,
    pub outcome: &'a CallOutcome,
    pub started_at: std::time::SystemTime,
    /// A step of a batch or replay a `hub__` control tool ran for the
    /// session: logged into its run, but not recorded (the recording keeps
    /// the control tool's call, which would run the steps again).
    pub nested: bool,
    /// The call's `saveImages`: keep the images it returned in the run.
    pub save_images: Option<&'a crate::protocol::SaveImages>,
    /// The client of `clients` that made the call (`None`: the main token,
    /// as far as the call knows): a client's call goes only into the run
    /// its session chose.
    pub client: Option<&'a str>,
}

impl<'a> Capture<'a> {
    /// The client context the call ran in (`<session>` or
    /// `<session>/<label>`): a recording of one context takes only its calls.
    pub fn context(&self) -> Option<&str> {
        self.source.context.as_deref()
    }

    /// A single client call (not a batch step): `kind` is its source
    /// (`tool_call`, `mcp_call`), with no template, condition or variables.
    pub fn single(
        kind: &str,
        params: &'a Value,
        outcome: &'a CallOutcome,
        started_at: std::time::SystemTime,
        save_images: Option<&'a crate::protocol::SaveImages>,
    ) -> Capture<'a> {
        Capture {
            source: Source {
                kind: kind.into(),
                batch_id: None,
                task_id: None,
                step_id: None,
                call_key: outcome.call_key.clone(),
                context: outcome.context.as_ref().map(|c| c.to_string()),
            },
            params,
            params_template: None,
            save_as: None,
            when: None,
            expect: None,
            variables: None,
            outcome,
            started_at,
            nested: false,
            save_images,
            client: None,
        }
    }

    /// The same capture, of a call `client` made.
    pub fn by(mut self, client: Option<&'a str>) -> Capture<'a> {
        self.client = client;
        self
    }
}

/// Told of every finished `tool_call` and batch step of a connection.
pub trait CallObserver: Send + Sync {
    /// Whether a call of `session` could matter to this observer now (it
    /// records, or has a run to log into). Callers ask first and build no
    /// [`Capture`] when nobody watches: the common case costs a lookup.
    fn watches(&self, session: &str) -> bool;

    /// `capture` finished for `session`; the returned event (if any) goes to
    /// that session's client before the call's own reply.
    fn finished<'a>(
        &'a self,
        session: &'a str,
        capture: Capture<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>>;
}
