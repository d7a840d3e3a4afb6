//! The test server's own tools, run by name (`dispatch`): the echo family,
//! the faults (hang, crash, garbage, slow, flaky), the counters and the
//! rest of the fixtures the integration tests call.

use super::*;

impl TestServer {
    /// Runs one tool. Faults that must not answer (`crash`) never return.
    pub(super) async fn dispatch(
        &self,
        tool: &str,
        args: &ToolArgs<'_>,
        cx: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        match tool {
            "echo" => {
                let mut message = args.string("message")?.to_string();
                // TESTSERVER_ECHO_ENV=NAME: echo also returns that variable of
                // the server's environment (a server that leaks its env).
                if let Ok(name) = std::env::var("TESTSERVER_ECHO_ENV") {
                    let value = std::env::var(&name).unwrap_or_default();
                    message.push_str(&format!(" {name}={value}"));
                }
                Ok(text(message))
            }
            "echo_structured" => {
                let value = args.get("value").cloned().unwrap_or(Value::Null);
                Ok(CallToolResult::structured(
                    json!({"value": value, "items": [{"id": 1}, {"id": 2}]}),
                ))
            }
            "add" => {
                let sum = tools::add(args.number("a")?, args.number("b")?);
                Ok(CallToolResult::structured(json!({ "sum": sum })))
            }
            "slow" | "slow_read" | "destructive" => {
                let ms = match tool {
                    "slow" | "slow_read" => args.uint("ms")?,
                    _ => args.opt_uint("ms")?.unwrap_or(0),
                };
                let message = args.opt_string("message")?.unwrap_or("done").to_owned();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(text(message)),
                    _ = cx.ct.cancelled() => Err(self.cancelled(tool, cx)),
                }
            }
            "hang" => {
                // rmcp does not drop a handler on `notifications/cancelled`; it
                // cancels `ct`, so that is the only way this call ends.
                cx.ct.cancelled().await;
                Err(self.cancelled(tool, cx))
            }
            "barrier" | "barrier_read" => {
                let released = self.barriers.wait(args.string("name")?, &cx.ct).await;
                released.ok_or_else(|| self.cancelled(tool, cx))
            }
            "await_waiting" => Ok(self
                .barriers
                .await_waiting(args.string("name")?, args.uint("count")?)
                .await),
            "release" => Ok(self.barriers.release(args.string("name")?)),
            "crash" => {
                let code = args.opt_int("code")?.unwrap_or(1);
                eprintln!("testserver {} crashing with code {code}", self.name);
                std::process::exit(i32::try_from(code).unwrap_or(1))
            }
            "flaky" => {
                let key = args.string("key")?;
                let failures = args.uint("failures")?;
                let error_text = args
                    .opt_string("errorText")?
                    .unwrap_or("connect ECONNREFUSED 127.0.0.1:9");
                let n = self.counters.bump("flaky", key).map_err(internal)?;
                if n <= failures {
                    Ok(CallToolResult::error(vec![ContentBlock::text(error_text)]))
                } else {
                    Ok(text(format!("ok after {failures} failures")))
                }
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text(
                args.string("message")?,
            )])),
            "jsonrpc_error" => {
                let code = args.opt_int("code")?.unwrap_or(-32603);
                let code = i32::try_from(code)
                    .map_err(|_| invalid(format!("code {code} does not fit in an i32")))?;
                let message = args
                    .opt_string("message")?
                    .unwrap_or("simulated json-rpc error");
                Err(ErrorData::new(ErrorCode(code), message.to_owned(), None))
            }
            "add_tool" | "remove_tool" | "change_tool" => {
                let reply = self.edit_dynamic(tool, args)?;
                self.notify_list_changed(cx).await;
                Ok(text(reply))
            }
            "counter" => {
                let key = args.string("key")?;
                let count = self.counters.bump("counter", key).map_err(internal)?;
                let mut result = text(count.to_string());
                result.structured_content = Some(json!({ "key": key, "count": count }));
                Ok(result)
            }
            "memo" => {
                let mut memo = self.memo.lock().map_err(|_| internal("memo lock".into()))?;
                if let Some(v) = args.opt_string("value")? {
                    *memo = Some(v.to_string());
                }
                let mut result = text(memo.clone().unwrap_or_default());
                result.structured_content =
                    Some(json!({ "memo": *memo, "pid": std::process::id() }));
                Ok(result)
            }
            "big" => {
                let bytes = args.uint("bytes")?;
                let bytes = usize::try_from(bytes)
                    .ok()
                    .filter(|b| *b <= tools::BIG_MAX_BYTES)
                    .ok_or_else(|| {
                        invalid(format!(
                            "bytes {bytes} is too large, expected at most {}",
                            tools::BIG_MAX_BYTES
                        ))
                    })?;
                Ok(text("x".repeat(bytes)))
            }
            "image" => Ok(CallToolResult::success(vec![
                ContentBlock::image(PNG_1X1_BASE64, "image/png"),
                ContentBlock::text("a 1x1 png"),
            ])),
            "log_burst" => {
                for i in 0..args.uint("count")?.min(1000) {
                    let m = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(i));
                    let _ = cx.peer.notify_logging_message(m).await;
                }
                Ok(text("sent"))
            }
            "stderr" => {
                eprintln!("{}", args.string("text")?);
                Ok(text("ok"))
            }
            "freeze" => {
                // A wedged server: alive, but it never reads or answers again.
                // SAFETY: raising a signal at ourselves.
                unsafe {
                    libc::raise(libc::SIGSTOP);
                }
                Ok(text("thawed"))
            }
            "spawn_grandchild" => {
                // Null stdio: the grandchild must not hold the hub's pipes,
                // only sit in our process group until someone kills it.
                let child = std::process::Command::new("sleep")
                    .arg("1000")
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| internal(format!("could not spawn `sleep 1000`: {e}")))?;
                let pid = child.id();
                let mut result = text(pid.to_string());
                result.structured_content = Some(json!({ "pid": pid }));
                Ok(result)
            }
            "garbage" => {
                write_garbage_line().map_err(|e| internal(format!("stdout write failed: {e}")))?;
                Ok(text("wrote a garbage line to stdout"))
            }
            name if self.extra.iter().any(|e| e == name) || self.is_dynamic(name) => {
                let message = args.opt_string("message")?.unwrap_or("").to_owned();
                let mut result = text(message.clone());
                result.structured_content =
                    Some(json!({"server": self.name, "tool": name, "message": message}));
                Ok(result)
            }
            name => Err(invalid(format!("unknown tool: {name}"))),
        }
    }

    fn cancelled(&self, tool: &str, cx: &RequestContext<RoleServer>) -> ErrorData {
        // Tests look for this line to prove the cancellation reached us.
        eprintln!("testserver {} cancelled {tool} id={}", self.name, cx.id);
        ErrorData::internal_error(format!("{tool} was cancelled"), None)
    }
}
