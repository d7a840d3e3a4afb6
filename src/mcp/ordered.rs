//! Keeping a call's progress and log notifications ahead of its answer.
//!
//! A server sends a call's `notifications/progress` before its response, on
//! one ordered stream. rmcp
//! hands each notification to its own spawned task but delivers the
//! response at once, so on a busy machine the answer can overtake the
//! notifications sent before it, and a relayed call would lose them.
//! [`OrderedTransport`] numbers those notifications as they arrive and notes,
//! for each watched request, how many had arrived before its answer; the
//! handler marks each one handled; [`Order::settled`] waits (event-driven,
//! bounded) until every notification that arrived before the answer has
//! been handled.
//!
//! Log messages (`notifications/message`) do not go through rmcp's handler
//! at all: [`OrderedTransport`] hands each to its [`Logs`] (the hub's
//! relay) as it arrives, before it reads the next message, so they reach the clients in
//! the order the server sent them (rmcp's task per notification can swap
//! two), and a log sent before an answer is passed on before it.
//!
//! Waits for upstream: rmcp delivering a response after the notifications
//! sent before it (docs/rmcp-upstream.md §1; open in 3.11.0).

#![allow(deprecated)] // logging: deprecated by SEP-2577, still spoken

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    GetExtensions, JsonRpcMessage, LoggingMessageNotificationParam, RequestId,
    ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::RxJsonRpcMessage;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::sync::Notify;

/// The arrival number of a tracked notification (in its extensions).
#[derive(Debug, Clone, Copy)]
pub struct Seq(pub u64);

/// The longest a call's answer waits for its notifications (a safety net:
/// they are normally handled within microseconds).
const SETTLE_LIMIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Inner {
    next: AtomicU64,
    pending: Mutex<BTreeSet<u64>>,
    /// Watched request -> arrival number of the last notification before
    /// its answer (`None` until the answer arrives).
    fences: Mutex<HashMap<RequestId, Option<u64>>>,
    changed: Notify,
}

/// Per server: which tracked notifications are still being handled.
#[derive(Clone, Default)]
pub struct Order(Arc<Inner>);

impl Order {
    fn arrived(&self) -> u64 {
        let n = self.0.next.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(mut p) = self.0.pending.lock() {
            p.insert(n);
        }
        n
    }

    fn answered(&self, id: &RequestId) {
        if let Ok(mut f) = self.0.fences.lock() {
            if let Some(slot) = f.get_mut(id) {
                *slot = Some(self.0.next.load(Ordering::SeqCst));
            }
        }
    }

    /// A tracked notification has been handled (call with its [`Seq`]).
    pub fn handled(&self, seq: Option<Seq>) {
        let Some(Seq(n)) = seq else {
            return;
        };
        if let Ok(mut p) = self.0.pending.lock() {
            p.remove(&n);
        }
        self.0.changed.notify_waiters();
    }

    /// Watch the answer to `id` (before it can arrive).
    pub fn watch(&self, id: &RequestId) {
        if let Ok(mut f) = self.0.fences.lock() {
            f.insert(id.clone(), None);
        }
    }

    /// After the answer to a watched `id`: wait until every tracked
    /// notification that arrived before it has been handled.
    pub async fn settled(&self, id: &RequestId) {
        let fence = self
            .0
            .fences
            .lock()
            .ok()
            .and_then(|mut f| f.remove(id))
            .flatten()
            .unwrap_or_else(|| self.0.next.load(Ordering::SeqCst));
        let wait = async {
            loop {
                let notified = self.0.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let clear = self
                    .0
                    .pending
                    .lock()
                    .map(|p| p.first().is_none_or(|first| *first > fence))
                    .unwrap_or(true);
                if clear {
                    return;
                }
                notified.await;
            }
        };
        if tokio::time::timeout(SETTLE_LIMIT, wait).await.is_err() {
            tracing::debug!(%id, "notifications before an answer were not all handled in time");
        }
    }

    /// A new connection: nothing from the old one is pending any more.
    pub fn reset(&self) {
        if let Ok(mut p) = self.0.pending.lock() {
            p.clear();
        }
        if let Ok(mut f) = self.0.fences.lock() {
            f.clear();
        }
        self.0.changed.notify_waiters();
    }
}

/// Where a server's log messages go, one at a time, in their order.
pub type Logs = Box<dyn Fn(LoggingMessageNotificationParam) + Send + Sync>;

/// A client transport that numbers progress notifications, fences watched
/// answers and relays log messages in order (see the module docs).
pub struct OrderedTransport<T> {
    inner: T,
    order: Order,
    logs: Logs,
    /// Whether the server has answered anything yet (see [`legacy_only`]).
    answered: bool,
}

impl<T> OrderedTransport<T> {
    pub fn new(inner: T, order: Order, logs: Logs) -> Self {
        OrderedTransport {
            inner,
            order,
            logs,
            answered: false,
        }
    }
}

/// The server's first answer refuses the hub's `server/discover` as an
/// unsupported version and lists only versions of the session era: it is a
/// session-era server (an rmcp server limited to them answers this way,
/// where others answer -32601). rmcp's `Auto` lifecycle falls back to
/// `initialize` only on an error of another code, so this one becomes
/// -32601, on the same connection; nothing else is touched.
fn legacy_only(e: &mut rmcp::model::ErrorData) {
    use rmcp::model::{ErrorCode, ProtocolVersion};
    if e.code != ErrorCode::UNSUPPORTED_PROTOCOL_VERSION {
        return;
    }
    let supported = e
        .data
        .as_ref()
        .and_then(|d| d.get("supported"))
        .and_then(|v| serde_json::from_value::<Vec<ProtocolVersion>>(v.clone()).ok())
        .unwrap_or_default();
    if !supported.is_empty() && supported.iter().all(ProtocolVersion::has_initialize) {
        e.code = ErrorCode::METHOD_NOT_FOUND;
    }
}

/// The server's first answer is a result, but not a `DiscoverResult`: a
/// session-era server that answers any method it does not know with an
/// empty result (`{}`) rather than -32601. rmcp's `Auto` lifecycle stops
/// there ("expect initialized result"); as -32601 it falls back to
/// `initialize` on the same connection.
fn not_discovered(m: &mut ServerJsonRpcMessage) {
    use rmcp::model::{ErrorCode, ErrorData, ServerResult};
    if let JsonRpcMessage::Response(r) = m {
        if !matches!(r.result, ServerResult::DiscoverResult(_)) {
            let error = ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "server/discover answered with a result that is not a DiscoverResult",
                None,
            );
            *m = JsonRpcMessage::error(error, Some(r.id.clone()));
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for OrderedTransport<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        {
            loop {
                let mut m: ServerJsonRpcMessage = self.inner.receive().await?;
                if !self.answered {
                    not_discovered(&mut m);
                }
                match &mut m {
                    JsonRpcMessage::Notification(n) => match &n.notification {
                        ServerNotification::LoggingMessageNotification(log) => {
                            (self.logs)(log.params.clone());
                            continue;
                        }
                        ServerNotification::ProgressNotification(_) => {
                            let seq = self.order.arrived();
                            n.notification.extensions_mut().insert(Seq(seq));
                        }
                        _ => {}
                    },
                    JsonRpcMessage::Response(r) => {
                        self.answered = true;
                        self.order.answered(&r.id);
                    }
                    JsonRpcMessage::Error(e) => {
                        if !std::mem::replace(&mut self.answered, true) {
                            legacy_only(&mut e.error);
                        }
                        if let Some(id) = &e.id {
                            self.order.answered(id);
                        }
                    }
                    _ => {}
                }
                return Some(m);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    #[tokio::test]
    async fn an_answer_waits_for_the_notifications_that_came_before_it() {
        let order = Order::default();
        let id = NumberOrString::Number(7);
        order.watch(&id);
        let first = order.arrived();
        let second = order.arrived();
        order.answered(&id);
        let later = order.arrived(); // after the answer: not waited for
        let settled = {
            let order = order.clone();
            let id = id.clone();
            tokio::spawn(async move { order.settled(&id).await })
        };
        order.handled(Some(Seq(second)));
        tokio::task::yield_now().await;
        assert!(!settled.is_finished());
        order.handled(Some(Seq(first)));
        tokio::time::timeout(Duration::from_secs(1), settled)
            .await
            .expect("settled once both were handled")
            .expect("join");
        order.handled(Some(Seq(later)));
    }

    #[tokio::test]
    async fn nothing_pending_settles_at_once() {
        let order = Order::default();
        let id = NumberOrString::Number(1);
        order.watch(&id);
        order.answered(&id);
        tokio::time::timeout(Duration::from_millis(100), order.settled(&id))
            .await
            .expect("no wait");
    }

    fn message(v: serde_json::Value) -> ServerJsonRpcMessage {
        serde_json::from_value(v).expect("a server message")
    }

    #[test]
    fn an_empty_result_to_discover_becomes_method_not_found() {
        let mut m = message(serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {}}));
        not_discovered(&mut m);
        let JsonRpcMessage::Error(e) = m else {
            panic!("still a result: {m:?}")
        };
        assert_eq!(e.error.code, rmcp::model::ErrorCode::METHOD_NOT_FOUND);
        assert_eq!(e.id, Some(NumberOrString::Number(0)));

        let discovered = serde_json::json!({"jsonrpc": "2.0", "id": 0, "result": {
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "supportedVersions": ["2026-07-28"], "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"}}});
        let mut m = message(discovered);
        not_discovered(&mut m);
        assert!(matches!(m, JsonRpcMessage::Response(_)), "{m:?}");
    }
}
