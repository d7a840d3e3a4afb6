//! The testserver's tool definitions (name, description, inputSchema,
//! annotations) and typed access to a call's arguments.

use std::sync::Arc;

use rmcp::model::{Icon, JsonObject, MetaObject, Tool, ToolAnnotations};
use rmcp::ErrorData;
use serde_json::{json, Number, Value};

/// A 1x1 transparent PNG, small enough to inline and valid enough to decode.
pub const PNG_1X1_BASE64: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// `big` refuses more than this, so a typo cannot eat the test machine's
/// memory; it is still well past rmcp's 16 MiB line cap.
pub const BIG_MAX_BYTES: usize = 64 * 1024 * 1024;

/// An object schema with the given properties and required names.
fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut object = JsonObject::new();
    object.insert("type".into(), json!("object"));
    object.insert("properties".into(), properties);
    if !required.is_empty() {
        object.insert("required".into(), json!(required));
    }
    Arc::new(object)
}

fn tool(name: &'static str, description: &'static str, schema: Arc<JsonObject>) -> Tool {
    // TESTSERVER_ECHO_DESCRIPTION changes echo's definition between runs,
    // so tests can show a rug pull that happens while the hub is down.
    if name == "echo" {
        if let Ok(d) = std::env::var("TESTSERVER_ECHO_DESCRIPTION") {
            return Tool::new(name, d, schema);
        }
    }
    Tool::new(name, description, schema)
}

/// Every built-in tool, in the order `tools/list` shows them.
pub fn builtin_tools() -> Vec<Tool> {
    let string = |d: &str| json!({"type": "string", "description": d});
    let integer = |d: &str| json!({"type": "integer", "description": d});
    let number = |d: &str| json!({"type": "number", "description": d});
    let name_only = schema(json!({"name": string("tool name")}), &["name"]);
    let mut add_tool = tool(
        "add",
        "Adds two numbers; structuredContent is {\"sum\": a+b}.",
        schema(
            json!({"a": number("first addend"), "b": number("second addend")}),
            &["a", "b"],
        ),
    );
    add_tool.output_schema = Some(schema(json!({"sum": {"type": "number"}}), &["sum"]));
    // The rest of a tool's definition, for tests that it is passed on.
    add_tool.title = Some("Add two numbers".into());
    add_tool.icons = Some(vec![Icon::new("https://example.com/add.png")
        .with_mime_type("image/png")
        .with_sizes(vec!["48x48".into()])]);
    let mut meta = JsonObject::new();
    meta.insert("example.com/arity".into(), json!(2));
    add_tool.meta = Some(MetaObject(meta));
    vec![
        tool(
            "echo",
            "Returns `message` as text.",
            schema(json!({"message": string("text to echo")}), &["message"]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true)),
        tool(
            "echo_structured",
            "Returns {value, items:[{id:1},{id:2}]} as structuredContent and as JSON text.",
            schema(json!({"value": {"description": "any JSON value"}}), &[]),
        ),
        add_tool,
        tool(
            "slow",
            "Waits `ms` milliseconds, then returns `message` or \"done\". Honours cancellation.",
            schema(
                json!({"ms": integer("milliseconds to wait"), "message": string("reply text")}),
                &["ms"],
            ),
        ),
        tool(
            "hang",
            "Never returns; ends only when the call is cancelled.",
            schema(json!({}), &[]),
        ),
        tool(
            "barrier",
            "Waits until `release` is called with the same `name` (or the call is cancelled).",
            schema(json!({"name": string("barrier name")}), &["name"]),
        ),
        tool(
            "barrier_read",
            "Waits at barrier `name` like `barrier`, marked read-only and idempotent: safe to run again.",
            schema(json!({"name": string("barrier name")}), &["name"]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "await_waiting",
            "Answers once at least `count` calls wait at barrier `name`, with how many wait.",
            schema(
                json!({"name": string("barrier name"), "count": integer("calls to wait for")}),
                &["name", "count"],
            ),
        ),
        tool(
            "release",
            "Lets every call at barrier `name` go (and any later one); answers how many waited.",
            schema(json!({"name": string("barrier name")}), &["name"]),
        ),
        tool(
            "crash",
            "Exits the server process mid-call without answering.",
            schema(json!({"code": integer("exit code, default 1")}), &[]),
        ),
        tool(
            "flaky",
            "Fails (isError) the first `failures` calls per `key`, then succeeds; counts persist in the state dir.",
            schema(
                json!({
                    "key": string("counter key"),
                    "failures": integer("how many calls fail first"),
                    "errorText": string("error text, default \"connect ECONNREFUSED 127.0.0.1:9\""),
                }),
                &["key", "failures"],
            ),
        ),
        tool(
            "fail",
            "Returns isError=true with `message` as text.",
            schema(json!({"message": string("error text")}), &["message"]),
        ),
        tool(
            "jsonrpc_error",
            "Answers with a JSON-RPC error instead of a result.",
            schema(
                json!({"code": integer("JSON-RPC code, default -32603"), "message": string("error message")}),
                &[],
            ),
        ),
        tool(
            "add_tool",
            "Registers a dynamic echo-like tool and sends notifications/tools/list_changed.",
            schema(
                json!({"name": string("new tool name"), "description": string("its description")}),
                &["name"],
            ),
        ),
        tool(
            "remove_tool",
            "Removes a dynamic tool and sends notifications/tools/list_changed.",
            name_only.clone(),
        ),
        tool(
            "change_tool",
            "Changes a dynamic tool's description and schema and sends notifications/tools/list_changed.",
            schema(
                json!({"name": string("dynamic tool name"), "description": string("new description")}),
                &["name", "description"],
            ),
        ),
        tool(
            "destructive",
            "A tool marked destructive; waits `ms` (default 0) like `slow`.",
            schema(json!({"ms": integer("milliseconds to wait")}), &[]),
        )
        .with_annotations(ToolAnnotations::new().destructive(true)),
        tool(
            "slow_read",
            "Waits `ms` like `slow`, marked read-only and idempotent: safe to run again.",
            schema(json!({"ms": integer("milliseconds to wait")}), &["ms"]),
        )
        .with_annotations(ToolAnnotations::new().read_only(true).idempotent(true)),
        tool(
            "counter",
            "Increments and returns the counter for `key`, persisted in the state dir.",
            schema(json!({"key": string("counter key")}), &["key"]),
        ),
        tool(
            "memo",
            "Remembers `value` in this process's memory when given (like a browser's page); returns what this process remembers and its pid.",
            schema(json!({"value": string("what to remember")}), &[]),
        ),
        tool(
            "big",
            "Returns a text of `bytes` 'x' characters.",
            schema(json!({"bytes": integer("length of the reply")}), &["bytes"]),
        ),
        tool(
            "log_burst",
            "Sends `count` info log messages (data 0, 1, …) back to back, then answers.",
            schema(json!({"count": integer("how many")}), &["count"]),
        ),
        tool(
            "image",
            "Returns a 1x1 PNG image content item plus a text item.",
            schema(json!({}), &[]),
        ),
        tool(
            "stderr",
            "Writes `text` as one line to stderr and returns \"ok\".",
            schema(json!({"text": string("line to write")}), &["text"]),
        ),
        tool(
            "freeze",
            "Stops the whole server process (SIGSTOP to itself): it answers nothing, not even ping.",
            schema(json!({}), &[]),
        ),
        tool(
            "spawn_grandchild",
            "Spawns `sleep 1000` in the server's process group and returns its pid.",
            schema(json!({}), &[]),
        ),
        tool(
            "garbage",
            "Writes a non-JSON line straight to stdout, then returns normally.",
            schema(json!({}), &[]),
        ),
    ]
}

/// An echo-like tool for `--extra-tool` and `add_tool`. `revision` (bumped
/// by `change_tool`) shows up in the schema so the schema changes too.
pub fn echo_like_tool(name: &str, description: &str, revision: u64) -> Tool {
    let mut properties = json!({"message": {"type": "string", "description": "text to echo"}});
    if revision > 0 {
        properties["note"] =
            json!({"type": "string", "description": format!("revision {revision}")});
    }
    Tool::new(
        name.to_owned(),
        description.to_owned(),
        schema(properties, &[]),
    )
}

/// Integers stay integers (`2 + 3` is `5`, not `5.0`); anything else is f64.
pub fn add(a: &Number, b: &Number) -> Value {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        if let Some(sum) = x.checked_add(y) {
            return json!(sum);
        }
    }
    json!(a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN))
}

/// A call's arguments with typed getters whose errors name the tool and say
/// what was expected.
pub struct Args<'a> {
    tool: &'a str,
    map: &'a JsonObject,
}

impl<'a> Args<'a> {
    pub fn new(tool: &'a str, map: &'a JsonObject) -> Self {
        Self { tool, map }
    }

    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, expected: &str) -> ErrorData {
        let found = match self.get(key) {
            None => "nothing".to_owned(),
            Some(v) => v.to_string(),
        };
        ErrorData::invalid_params(
            format!(
                "invalid arguments for tool `{}`: `{key}` must be {expected}, got {found}",
                self.tool
            ),
            None,
        )
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<&'a str>, ErrorData> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.wrong(key, "a string")),
        }
    }

    pub fn string(&self, key: &str) -> Result<&'a str, ErrorData> {
        self.opt_string(key)?
            .ok_or_else(|| self.wrong(key, "a string"))
    }

    pub fn number(&self, key: &str) -> Result<&'a Number, ErrorData> {
        match self.get(key) {
            Some(Value::Number(n)) => Ok(n),
            _ => Err(self.wrong(key, "a number")),
        }
    }

    pub fn opt_int(&self, key: &str) -> Result<Option<i64>, ErrorData> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "an integer")),
        }
    }

    pub fn opt_uint(&self, key: &str) -> Result<Option<u64>, ErrorData> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a non-negative integer")),
        }
    }

    pub fn uint(&self, key: &str) -> Result<u64, ErrorData> {
        self.opt_uint(key)?
            .ok_or_else(|| self.wrong(key, "a non-negative integer"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_has_an_object_schema_and_a_unique_name() {
        let tools = builtin_tools();
        let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), tools.len(), "duplicate tool names");
        for t in &tools {
            assert_eq!(
                t.input_schema.get("type"),
                Some(&json!("object")),
                "{}",
                t.name
            );
            assert!(t.description.is_some(), "{} has no description", t.name);
        }
    }

    #[test]
    fn annotations_mark_echo_read_only_and_destructive_destructive() {
        let tools = builtin_tools();
        let find = |n: &str| tools.iter().find(|t| t.name == n).cloned().unwrap();
        assert_eq!(find("echo").annotations.unwrap().read_only_hint, Some(true));
        assert_eq!(
            find("destructive").annotations.unwrap().destructive_hint,
            Some(true)
        );
    }

    #[test]
    fn add_keeps_integers_integral() {
        let n = |v: Value| match v {
            Value::Number(n) => n,
            _ => unreachable!(),
        };
        assert_eq!(add(&n(json!(2)), &n(json!(3))), json!(5));
        assert_eq!(add(&n(json!(1.5)), &n(json!(2))), json!(3.5));
    }

    #[test]
    fn args_errors_name_the_tool_key_and_expectation() {
        let map = json!({"ms": -1, "message": 3})
            .as_object()
            .cloned()
            .unwrap();
        let args = Args::new("slow", &map);
        let e = args.uint("ms").unwrap_err();
        assert_eq!(e.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(
            e.message
                .contains("tool `slow`: `ms` must be a non-negative integer, got -1"),
            "{}",
            e.message
        );
        assert!(args.opt_string("message").is_err());
        assert!(args
            .string("missing")
            .unwrap_err()
            .message
            .contains("got nothing"));
        assert_eq!(args.opt_string("absent").unwrap(), None);
    }
}
