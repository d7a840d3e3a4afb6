//! What a `tool_call`'s `callKey` keeps of the first call's answer, and the
//! answer a repeat is sent from it.
//!
//! Held once: a result the server's raw answer gives again (its
//! `structuredContent`, or its text blocks joined) is not kept beside it;
//! a repeat's reply has it back. A call cancelled after the tool had it
//! keeps its outcome too, saying it is unknown: the key never runs the tool
//! twice.
//!
//! Only outcomes of calls that ran are kept: one that failed before the
//! tool had it (a declined or expired confirmation, `TOOL_NOT_FOUND`,
//! params refused before the call, a server not running, a cancel while
//! waiting) frees the key, so the same request sent again (a chat block
//! run again) runs again.

use serde_json::Value;

use crate::callkeys::KeyGuard;
use crate::errors::ErrorType;
use crate::hub::CallOutcome;
use crate::mcp::send::result_value;

/// Marks a kept answer whose `result` is to be read from its `raw`.
const FROM_RAW: &str = "_resultFromRaw";

/// Give the key its answer, or free it when the call never reached the
/// tool (nothing ran, so a repeat runs it).
pub fn settle(guard: KeyGuard, outcome: &CallOutcome) {
    if !ran(outcome) {
        return;
    }
    let cancelled = outcome.error.as_ref().map(|e| e.error_type) == Some(ErrorType::Cancelled);
    let mut answer = outcome.to_json();
    if cancelled {
        if let Some(Value::Object(e)) = answer.get_mut("error") {
            if let Some(Value::String(m)) = e.get_mut("message") {
                m.push_str(" (the tool had the call, so its outcome is unknown; this callKey will not run it again)");
            }
            // One suggestion, the one the message gives: not "run it again".
            e.insert("suggestion".into(), Value::String(format!(
                "check whether {} took effect; to run it once more anyway, send the call with a new callKey",
                outcome.tool
            )));
            e.insert("recoverable".into(), Value::Bool(false));
        }
    }
    if let Value::Object(o) = &mut answer {
        let again = o.get("raw").map(result_value);
        if outcome.success && again.is_some() && again.as_ref() == o.get("result") {
            o.remove("result");
            o.insert(FROM_RAW.into(), Value::Bool(true));
        }
    }
    guard.finish(answer);
}

/// The call ran: it succeeded, or some attempt may have reached the tool
/// (its own failure, a timeout or a cancel after it had the call).
fn ran(outcome: &CallOutcome) -> bool {
    outcome.success || outcome.reached
}

/// The `tool_result` body a repeat is sent: the kept answer, whole again.
pub fn answer(kept: &Value) -> Value {
    let mut answer = kept.clone();
    if let Value::Object(o) = &mut answer {
        if o.remove(FROM_RAW).is_some() {
            if let Some(v) = o.get("raw").map(result_value) {
                o.insert("result".into(), v);
            }
        }
    }
    answer
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_result_the_raw_answer_gives_again_is_kept_once() {
        let raw = json!({"content": [{"type": "text", "text": "hello"}]});
        let kept = json!({"success": true, "raw": raw, FROM_RAW: true});
        let back = answer(&kept);
        assert_eq!(back["result"], "hello");
        assert!(back.get(FROM_RAW).is_none());
        let plain = json!({"success": true, "result": 1});
        assert_eq!(answer(&plain), plain);
    }
}
