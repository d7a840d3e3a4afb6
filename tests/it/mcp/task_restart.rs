//! A durable MCP task's result reads the same before and after a restart
//! (issue 49.6): a task is kept in its journal, where secrets never go, so
//! its result is the redacted one both times, and says so
//! (`_meta["toolhub/redacted"]` and a note in its content).

use serde_json::{json, Value};

use super::tasks::{create, finished, get, hub};

/// The parts of a finished task's `tasks/get` that are its result.
fn result_of(done: &Value) -> Value {
    assert_eq!(done["status"], "completed", "{done}");
    done["result"].clone()
}

#[tokio::test]
async fn a_durable_task_result_is_the_same_before_and_after_a_sigkill_restart() {
    let hub = hub(json!({})).await;
    let value = json!({"token": "abc123-TASK-TOKEN", "password": "pw-TASK-77", "plain": "kept"});
    let id = create(
        &hub,
        "t__echo_structured",
        json!({"value": value}),
        json!({"toolhub/task": true}),
    )
    .await;
    finished(&hub, &id).await;
    let before = result_of(&get(&hub, &id).await);
    let text = before.to_string();
    assert!(
        !text.contains("abc123-TASK-TOKEN") && !text.contains("pw-TASK-77"),
        "{before}"
    );
    let structured = &before["structuredContent"]["value"];
    assert_eq!(
        structured["token"],
        json!({"$redacted": "token"}),
        "{before}"
    );
    assert_eq!(structured["plain"], "kept", "{before}");
    assert_eq!(before["_meta"]["toolhub/redacted"], true, "{before}");
    assert!(
        before["content"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["text"]
                .as_str()
                .unwrap_or("")
                .starts_with("toolhub: values under secret keys")),
        "the result says it is redacted: {before}"
    );

    let hub = hub.crash_and_restart().await;
    let after = result_of(&get(&hub, &id).await);
    assert_eq!(after, before, "the same result after the restart");
}
