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
    fn watches(&self, session: &str) -> bool {
        self.0.iter().any(|o| o.watches(session))
    }

    fn finished<'a>(
        &'a self,
        session: &'a str,
        capture: Capture<'a>,
    ) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>> {
        Box::pin(async move {
            let mut first = None;
            for o in self.0.iter().filter(|o| o.watches(session)) {
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::errors::{ErrorType, HubError};
    use crate::hub::CallOutcome;

    /// Watches one session; counts what it is told and answers with an event.
    struct One {
        session: &'static str,
        told: AtomicUsize,
    }

    impl CallObserver for One {
        fn watches(&self, session: &str) -> bool {
            session == self.session
        }

        fn finished<'a>(
            &'a self,
            session: &'a str,
            _capture: Capture<'a>,
        ) -> Pin<Box<dyn Future<Output = Option<Value>> + Send + 'a>> {
            self.told.fetch_add(1, Ordering::SeqCst);
            Box::pin(
                async move { Some(serde_json::json!({ "from": self.session, "for": session })) },
            )
        }
    }

    #[tokio::test]
    async fn only_the_observers_watching_a_session_are_told_of_its_calls() {
        let a = Arc::new(One {
            session: "a",
            told: AtomicUsize::new(0),
        });
        let b = Arc::new(One {
            session: "b",
            told: AtomicUsize::new(0),
        });
        let all = Observers(vec![a.clone(), b.clone()]);
        assert!(all.watches("a") && all.watches("b"));
        assert!(
            !all.watches("c"),
            "nobody watches c: callers build no capture"
        );

        let out = CallOutcome::failed(
            "t__x",
            HubError::new(ErrorType::ToolNotFound, "no"),
            std::time::Duration::ZERO,
        );
        let params = Value::Null;
        let capture = Capture::single(
            "tool_call",
            &params,
            &out,
            std::time::SystemTime::now(),
            None,
        );
        let ev = all.finished("b", capture).await;
        assert_eq!(ev, Some(serde_json::json!({"from": "b", "for": "b"})));
        assert_eq!(a.told.load(Ordering::SeqCst), 0, "a does not watch b");
        assert_eq!(b.told.load(Ordering::SeqCst), 1);
    }
}
