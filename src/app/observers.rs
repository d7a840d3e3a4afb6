//! The fan-out observer: the engine and the dispatcher are given one
//! [`CallObserver`]; this one tells each service that listens, in order.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::Value;

use crate::hub::observe::{CallObserver, Capture};

/// Every observer, told in order. The first event any of them returns is
/// the one sent before the call's reply (the recorder's comes first); a
/// later one is logged rather than lost silently.
pub struct Observers(pub Vec<Arc<dyn CallObserver>>);

impl CallObserver for Observers {
    fn finished<'a>(
        &'a self,
        session: &'a str,
        capture: Capture<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>> {
        Box::pin(async move {
            let mut first = None;
            for o in &self.0 {
                if let Some(ev) = o.finished(session, capture.clone()).await {
                    if first.is_none() {
                        first = Some(ev);
                    } else {
                        tracing::info!(session, event = %ev, "a second observer event was not sent");
                    }
                }
            }
            first
        })
    }
}
