//! `replay_recording`: `live` runs the recorded steps as a task of the
//! engine (retries, need_user, durability, resume); `dry` executes nothing
//! and checks tools, templates and schemas; `offline` answers every step from
//! the recording. Each step streams `replay_step_result` with the recorded
//! and the new outcome and a `diff`; `replay_complete` summarises.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::schema;
use crate::caller::Caller;
use crate::client_context::ClientContext;
use crate::diff::{self, Ignore};
use crate::engine::Engine;
use crate::errors::{ErrorType, HubError};
use crate::protocol::recording::{Mode, ReplayReq};
use crate::protocol::{self, BatchOptions, BatchReq, BatchStep, MsgId};
use crate::session::Outbox;
use crate::session::Place;
use crate::store::offload::blocking;
use crate::store::recordings as store;
use crate::store::recordings::format::{Recording, Step};

/// The recorded outcome of a step, as replay messages show it.
fn outcome_of(s: &Step) -> Value {
    json!({"success": s.success, "result": s.result, "error": s.error})
}

/// The batch a live replay runs: the lossless batch export (templates,
/// saveAs, when, expect; secrets as `{{vars.name}}`), the variables it reads
/// that have no recorded default (they must be given), and the defaults.
pub fn batch_of(rec: &Recording) -> (Vec<BatchStep>, Vec<String>, Map<String, Value>) {
    let (msg, required) = super::export::batch(rec);
    let steps = serde_json::from_value(msg["steps"].clone()).unwrap_or_default();
    let defaults = match &msg["options"]["variables"] {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    (steps, required, defaults)
}

/// The replay's variables: the recorded defaults, overridden by `given`;
/// and the required names still missing (sorted).
fn variables(
    defaults: &Map<String, Value>,
    given: Option<&Map<String, Value>>,
    required: &[String],
) -> (Map<String, Value>, Vec<String>) {
    let mut vars = defaults.clone();
    vars.extend(given.cloned().unwrap_or_default());
    let missing = required
        .iter()
        .filter(|n| !vars.contains_key(*n))
        .cloned()
        .collect();
    (vars, missing)
}

/// `replay_recording` from a connection: stream, then `replay_complete`;
/// `place` (its session's place) is held until then.
pub async fn run(engine: Engine, out: Outbox, id: MsgId, req: ReplayReq, place: Option<Place>) {
    let done = execute(&engine, Some(&out), &out.caller(), &req).await;
    drop(place);
    match done {
        Ok(done) => out.send(protocol::with_reply_to(done, &id)),
        Err(e) => out.send(protocol::error_msg(&id, &e)),
    };
}

/// Run a replay for `caller` (a recording it may see; the steps run in its
/// view, on its session); step results go to `out` when there is one.
/// Returns the `replay_complete` message (also kept as `last-replay.json`
/// for exports).
pub async fn execute(
    engine: &Engine,
    out: Option<&Outbox>,
    caller: &Caller,
    req: &ReplayReq,
) -> Result<Value, HubError> {
    let view = caller.view.clone();
    let hub = engine.hub();
    let cfg = hub.config();
    let storage = cfg.recording.storage_path.clone();
    let (dir, id, who) = (storage.clone(), req.recording_id.clone(), caller.clone());
    let rec = blocking(move || {
        let mut rec = super::load_for(&dir, &id, &who)?;
        store::inline_files(&dir, &mut rec);
        Ok(rec)
    })
    .await?;
    let ignore = Ignore::new(&cfg.replay.ignore_paths, &cfg.replay.ignore_regexes)
        .map_err(|m| HubError::new(ErrorType::InvalidMessage, format!("replay.ignore: {m}")))?;
    let replay_id = format!("replay-{}", uuid::Uuid::new_v4().simple());
    let mode = req.mode.unwrap_or(Mode::Live);
    let sink = Sink(out.cloned());
    let mut msg = match mode {
        Mode::Dry => dry(
            engine,
            &sink,
            &rec,
            &replay_id,
            req.variables.as_ref(),
            view.as_deref(),
        ),
        Mode::Offline => offline(&sink, &rec, &replay_id),
        Mode::Live => live(engine, &sink, caller, &rec, &replay_id, req, &ignore).await?,
    };
    msg["type"] = json!("replay_complete");
    msg["recordingId"] = json!(rec.header.recording_id);
    msg["replayId"] = json!(replay_id);
    msg["mode"] = json!(format!("{mode:?}").to_lowercase());
    // Written like every other file: secrets redacted and masked.
    let saved = crate::history::redact(&msg, &engine.hub().config().security);
    let id = rec.header.recording_id.clone();
    let _ = blocking(move || {
        let dir = store::dir_of(&storage, &id)?;
        let _ = std::fs::write(dir.join("last-replay.json"), saved.to_string());
        Ok(())
    })
    .await;
    Ok(msg)
}

/// Where step results go: a connection, or nowhere (built-in tool).
#[derive(Clone)]
struct Sink(Option<Outbox>);

impl Sink {
    fn send(&self, v: Value) {
        if let Some(o) = &self.0 {
            o.send(v);
        }
    }
}

/// Waits before each step for `speed` (1 = original pacing, n = n× faster):
/// the recorded pause between the end of a step and the start of the next,
/// so the replay's own call durations are not counted twice.
pub fn pacing(steps: &[crate::store::recordings::format::Step], speed: f64) -> Vec<Duration> {
    let mut prev_end = 0u64;
    steps
        .iter()
        .map(|s| {
            let pause = s.t_offset_ms.saturating_sub(prev_end);
            prev_end = prev_end.max(s.t_offset_ms + s.duration_ms);
            Duration::from_millis((pause as f64 / speed) as u64)
        })
        .collect()
}

/// One live step against its recording: `failed` when it was not run (a
/// stop before it) or fails now where it succeeded when recorded; else
/// `changed` when its outcome differs ([`diff`]); else `same` (a step that
/// failed when recorded and fails now the same way is `same`).
fn step_verdict(recorded: bool, now: bool, not_run: bool, differs: bool) -> &'static str {
    if not_run || (recorded && !now) {
        "failed"
    } else if differs {
        "changed"
    } else {
        "same"
    }
}

/// What a live replay's steps said so far.
#[derive(Clone, Default)]
struct Tally {
    /// Steps that succeeded now.
    ok: usize,
    differences: Vec<Value>,
    /// Steps reported, and those whose verdict was `failed` / `changed`.
    reported: usize,
    failed: usize,
    changed: usize,
}

impl Tally {
    /// The replay's verdict: `failed` when a step failed or some step was
    /// never reported (the task was cancelled or ended early); else
    /// `changed` when a step changed; else `same`.
    fn verdict(&self, total: usize) -> &'static str {
        if self.failed > 0 || self.reported < total {
            "failed"
        } else if self.changed > 0 {
            "changed"
        } else {
            "same"
        }
    }
}

fn complete(total: usize, ok: usize, differences: Vec<Value>) -> Value {
    json!({
        "success": ok == total && differences.is_empty(),
        "totalSteps": total,
        "successCount": ok,
        "failureCount": total - ok,
        "differences": differences,
    })
}

fn dry(
    engine: &Engine,
    out: &Sink,
    rec: &Recording,
    replay_id: &str,
    given: Option<&Map<String, Value>>,
    view: Option<&str>,
) -> Value {
    let hub = engine.hub();
    let tools = hub.tools();
    // In a view, a step is judged as the live replay will run it: against
    // the view's tools only (a tool outside it is a problem, not a pass).
    let in_view = view.map(|v| hub.view(v));
    let templates = engine.templates();
    let (steps, required, defaults) = batch_of(rec);
    let (vars, missing) = variables(&defaults, given, &required);
    let mut ctx = Map::new();
    ctx.insert("vars".into(), Value::Object(vars));
    let mut ok = 0;
    let mut problems_all = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let mut problems = Vec::new();
        // A variable the replay still needs is named, not a failure: a dry
        // run says what a live one will ask for.
        let mut reads = std::collections::BTreeSet::new();
        crate::engine::redacted::templated(&step.params, false, &mut reads);
        let step_missing: Vec<&String> = missing.iter().filter(|m| reads.contains(*m)).collect();
        let resolved = match &in_view {
            Some(Ok(v)) => v.resolve(&step.tool),
            Some(Err(e)) => Err(e.clone()),
            None => tools.resolve(&step.tool).cloned(),
        };
        match resolved {
            Err(e) => problems.push(e.message),
            Ok(info) => {
                // Earlier steps' variables do not exist in a dry run: check
                // the templates parse, render only those that need vars alone.
                match templates.check_params(&step.params) {
                    Err(e) => problems.push(format!("template: {e}")),
                    Ok(_) if !step_missing.is_empty() => {}
                    Ok(roots) if roots.iter().all(|r| r == "vars") => {
                        match templates.render_params(&step.params, &Value::Object(ctx.clone())) {
                            Ok(p) => problems.extend(schema::check(&info.input_schema, &p)),
                            Err(e) => problems.push(format!("template: {e}")),
                        }
                    }
                    Ok(_) => {}
                }
            }
        }
        if problems.is_empty() {
            ok += 1;
        } else {
            problems_all.push(json!({"stepIndex": i, "problems": problems}));
        }
        out.send(json!({
            "type": "replay_step_result", "replayId": replay_id, "recordingId": rec.header.recording_id,
            "mode": "dry", "stepIndex": i, "tool": step.tool, "success": problems.is_empty(),
            "problems": problems, "missingVariables": step_missing,
            "recorded": outcome_of(&rec.steps[i]), "diff": [],
        }));
    }
    let mut msg = complete(steps.len(), ok, problems_all);
    // Nothing ran: `same` when nothing would stop a live replay.
    msg["verdict"] = json!(if ok == steps.len() { "same" } else { "failed" });
    msg["variableDefaults"] = Value::Object(defaults);
    msg["missingVariables"] = json!(missing);
    msg
}

fn offline(out: &Sink, rec: &Recording, replay_id: &str) -> Value {
    let mut ok = 0;
    for s in &rec.steps {
        if s.success {
            ok += 1;
        }
        out.send(json!({
            "type": "replay_step_result", "replayId": replay_id, "recordingId": rec.header.recording_id,
            "mode": "offline", "stepIndex": s.seq, "tool": s.qualified_name.clone().unwrap_or_else(|| s.tool.clone()),
            "success": s.success, "recorded": outcome_of(s), "actual": outcome_of(s), "diff": [],
        }));
    }
    let mut msg = complete(rec.steps.len(), ok, Vec::new());
    // The recorded answers, given back as they are.
    msg["verdict"] = json!("same");
    msg
}

async fn live(
    engine: &Engine,
    out: &Sink,
    caller: &Caller,
    rec: &Recording,
    replay_id: &str,
    req: &ReplayReq,
    ignore: &Ignore,
) -> Result<Value, HubError> {
    let (steps, required, defaults) = batch_of(rec);
    let (vars, missing) = variables(&defaults, req.variables.as_ref(), &required);
    if !missing.is_empty() {
        let e = HubError::new(
            ErrorType::InvalidMessage,
            format!(
                "the replay needs values for these variables (secrets are redacted when recorded, so they must be given again): {}",
                missing.join(", ")
            ),
        )
        .with_suggestion(format!("pass them in \"variables\", e.g. {{\"variables\": {{\"{}\": \"…\"}}}}; a dry replay lists every missing one", missing[0]));
        return Err(e);
    }
    let batch = BatchReq {
        steps,
        options: BatchOptions {
            stop_on_error: !req.continue_on_error,
            timeout: None,
            variables: Some(vars),
            // The values a recording could not keep are secrets.
            secrets: required,
        },
        call_key: None,
        context: None,
    };
    // A replay runs in a context of its own (its own browser), unless the
    // client names one; its own context's instances stop when it ends.
    if let Some(Err(m)) = req
        .context
        .as_deref()
        .map(crate::client_context::check_label)
    {
        return Err(HubError::new(
            ErrorType::InvalidMessage,
            format!("replay_recording: {m}"),
        ));
    }
    let own = format!("replay-{replay_id}");
    let session = &caller.session;
    let context = ClientContext::session(session, Some(req.context.as_deref().unwrap_or(&own)));
    let task = crate::engine::create_task_in(
        engine,
        json!(replay_id),
        &batch,
        out.0.clone(),
        Some(context.clone()),
        caller,
        None,
    )?;
    // Without a connection (hub__record_replay) the steps are the caller's.
    task.set_caller(session);
    if let Some(speed) = req.speed.filter(|s| *s > 0.0) {
        task.set_delays(pacing(&rec.steps, speed));
    }
    let diffs = Arc::new(Mutex::new(Tally::default()));
    {
        let (rec, diffs, ignore, replay_id, task_id) = (
            rec.clone(),
            diffs.clone(),
            ignore.clone(),
            replay_id.to_string(),
            task.id.clone(),
        );
        task.set_observer(Arc::new(move |i: usize, step_msg: &Value| {
            let recorded = rec.steps.get(i)?;
            let success = step_msg["success"].as_bool().unwrap_or(false);
            let error: Option<HubError> = serde_json::from_value(step_msg["error"].clone()).ok();
            // Not run after a stop (stopOnError): nothing to compare; it
            // counts as not reached.
            let not_run = !success && step_msg["skipped"] == true;
            let d = if not_run {
                Vec::new()
            } else {
                diff::compare(
                recorded.success,
                &recorded.result,
                recorded.error.as_ref(),
                success,
                &step_msg["result"],
                error.as_ref(),
                &ignore,
            )
            };
            let verdict = step_verdict(recorded.success, success, not_run, !d.is_empty());
            if let Ok(mut acc) = diffs.lock() {
                acc.reported += 1;
                if success {
                    acc.ok += 1;
                }
                match verdict {
                    "failed" => acc.failed += 1,
                    "changed" => acc.changed += 1,
                    _ => {}
                }
                if !d.is_empty() {
                    acc.differences.push(json!({"stepIndex": i, "tool": recorded.tool, "diff": d}));
                }
            }
            // Sent by the task (to `out`, its owner) in its order: held
            // with the step's result until the journal has it.
            Some(json!({
                "type": "replay_step_result", "replayId": replay_id, "recordingId": rec.header.recording_id,
                "taskId": task_id, "mode": "live", "stepIndex": i, "tool": step_msg["tool"],
                "success": success, "recorded": outcome_of(recorded),
                "actual": {"success": success, "result": step_msg["result"], "error": step_msg["error"]},
                "skipped": step_msg["skipped"], "diff": d, "verdict": verdict,
            }))
        }));
    }
    let handle = crate::engine::start(
        engine,
        task.clone(),
        0,
        crate::engine::state::TaskEvent::Start,
        // The replay request holds its session's place (`run`).
        None,
    )?;
    // An abandoned built-in call stops the replay's task too.
    let _stop = crate::engine::StopOnDrop(Some(task.clone()));
    let _ = handle.await;
    if req.context.is_none() {
        engine
            .hub()
            .instances()
            .end_where(|c| *c == context, "its replay ended");
    }
    let tally = diffs.lock().map(|d| d.clone()).unwrap_or_default();
    let total = rec.steps.len();
    let verdict = tally.verdict(total);
    let mut s = complete(total, tally.ok, tally.differences);
    s["verdict"] = json!(verdict);
    s["taskId"] = json!(task.id);
    s["state"] = json!(task.state());
    // The label it ran in: the one asked for, or its own.
    s["context"] = json!(context.label());
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(t: u64, d: u64) -> crate::store::recordings::format::Step {
        crate::store::recordings::format::Step {
            seq: 0,
            source: crate::store::recordings::format::Source {
                kind: "tool_call".into(),
                batch_id: None,
                task_id: None,
                step_id: None,
                call_key: None,
                context: None,
            },
            tool: "x".into(),
            qualified_name: None,
            server: None,
            params: json!({}),
            params_template: None,
            save_as: None,
            when: None,
            expect: None,
            variables: None,
            timestamp: String::new(),
            t_offset_ms: t,
            duration_ms: d,
            success: true,
            attempts: 1,
            result: Value::Null,
            error: None,
            images: Vec::new(),
            screenshot: None,
        }
    }

    #[test]
    fn a_replay_is_same_changed_or_failed() {
        // recorded ok, now ok: same, or changed with a difference.
        assert_eq!(step_verdict(true, true, false, false), "same");
        assert_eq!(step_verdict(true, true, false, true), "changed");
        // fails now where it succeeded, or never ran: failed.
        assert_eq!(step_verdict(true, false, false, true), "failed");
        assert_eq!(step_verdict(true, false, true, false), "failed");
        // failed when recorded: the same failure is same, a success changed.
        assert_eq!(step_verdict(false, false, false, false), "same");
        assert_eq!(step_verdict(false, true, false, true), "changed");
        let t = |reported, failed, changed| Tally {
            reported,
            failed,
            changed,
            ..Tally::default()
        };
        assert_eq!(t(2, 0, 0).verdict(2), "same");
        assert_eq!(t(2, 0, 1).verdict(2), "changed");
        assert_eq!(t(2, 1, 1).verdict(2), "failed");
        assert_eq!(t(1, 0, 0).verdict(2), "failed", "a step never reported");
    }

    #[test]
    fn pacing_keeps_the_recorded_pauses_scaled_by_speed() {
        // Started at 0 (100 ms), 1100 (50 ms), 1150 (0 ms): pauses 0, 1000, 0.
        let steps = [step(0, 100), step(1100, 50), step(1150, 10)];
        let ms = |v: Vec<Duration>| v.into_iter().map(|d| d.as_millis()).collect::<Vec<_>>();
        assert_eq!(ms(pacing(&steps, 1.0)), vec![0, 1000, 0]);
        assert_eq!(ms(pacing(&steps, 4.0)), vec![0, 250, 0]);
    }
}
