//! Drives one task: steps in order, conditions, templates, calls with
//! retries and expectations, variables, streamed results, the batch
//! deadline and cancellation. A disconnected owner does not stop it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::condition::EvalCtx;
use super::confirm::Subject;
use super::service::Engine;
use super::state::{StepEvent, StepState, TaskEvent, TaskState};
use super::step_end::{
    emit_state, enter_need_user, finish_step, leave_need_user, not_run, record, step_base,
};
use super::task::Task;
use super::uncertain::{settle_uncertain, Uncertain};
use crate::errors::{ErrorType, HubError};
use crate::hub::{Approval, CallOutcome, CallRequest, Confirmer, Decision, Question};

/// What a run holds while it drives its task; let go right before
/// `batch_complete` goes out, so a client may resume the task, or start
/// more work, as soon as it sees the task end.
pub struct Hold {
    /// The task's run lock (`task.driving`).
    pub driving: tokio::sync::OwnedMutexGuard<()>,
    /// The place under its session's cap of the request that started this
    /// run (`tool_batch`, `resume_task`); none for a run a tool call or a
    /// replay holds the place for.
    pub place: Option<crate::session::Place>,
}

/// Run `task` from step `start` to its end, holding `hold`.
pub async fn drive(engine: Engine, task: Arc<Task>, start: usize, event: TaskEvent, hold: Hold) {
    let hub = engine.hub();
    // The task's instances of per-context servers live while it runs,
    // even if its session ends (it goes on as a durable task).
    let _hold = hub.instances().hold(&task.context());
    // Set by `start`/`resume` before this run was spawned.
    let run_cancel = task.cancel_token();
    let resumed = event == TaskEvent::Resume;
    if resumed {
        engine.persist_resume(&task, start);
    }
    if task.transition(event).is_none() {
        engine.flush(&task);
        return;
    }
    engine.persist_state(&task);
    emit_state(&task, None);
    let timed_out = Arc::new(AtomicBool::new(false));
    let batch_cancel = run_cancel.child_token();
    if let Some(ms) = task.plan.options.timeout {
        let (t, c, flag) = (
            Duration::from_millis(ms),
            batch_cancel.clone(),
            timed_out.clone(),
        );
        tokio::spawn(async move {
            tokio::select! {
                _ = tokio::time::sleep(t) => { flag.store(true, Ordering::SeqCst); c.cancel(); }
                _ = c.cancelled() => {}
            }
        });
    }
    let total = task.plan.steps.len();
    let mut any_failed = false;
    // Set when a failure stops the batch (`stopOnError`): from then on only
    // cleanup steps (`when` asks for a failure, or "always") run; the others
    // are reported not run and stay pending, so a resume runs them.
    let mut stopped_at: Option<usize> = None;
    let stop_on = |stopped_at: &mut Option<usize>, i: usize| {
        if task.plan.options.stop_on_error && stopped_at.is_none() {
            *stopped_at = Some(i);
        }
    };
    for i in start..total {
        if batch_cancel.is_cancelled() {
            break;
        }
        let state = task.with(|d| d.steps[i].state);
        if state.is_finished() {
            continue; // finished steps never run again
        }
        if let Some(at) = stopped_at {
            let cleanup = task.plan.steps[i]
                .when
                .as_ref()
                .is_some_and(|c| c.runs_after_stop());
            if !cleanup {
                not_run(&task, i, at, resumed);
                continue;
            }
        }
        if state == StepState::Uncertain {
            match settle_uncertain(&engine, &task, i, &batch_cancel).await {
                Uncertain::Rerun => task.with(|d| d.steps[i].state = StepState::Pending),
                Uncertain::Skipped => continue,
                Uncertain::Failed => {
                    any_failed = true;
                    stop_on(&mut stopped_at, i);
                    continue;
                }
            }
        }
        let pause = task.delay_before(i);
        if !pause.is_zero() {
            engine.flush(&task);
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = batch_cancel.cancelled() => break,
            }
        }
        let ok = run_step(
            &engine,
            &task,
            i,
            &batch_cancel,
            &timed_out,
            resumed,
            stopped_at,
        )
        .await;
        if !ok {
            any_failed = true;
            stop_on(&mut stopped_at, i);
        }
    }
    batch_cancel.cancel(); // stops the deadline timer
    let (ev, err) = if run_cancel.is_cancelled() && !timed_out.load(Ordering::SeqCst) {
        if hub.shutdown.is_cancelled() {
            (TaskEvent::HubStopped, None)
        } else {
            (
                TaskEvent::Cancel,
                Some(HubError::new(
                    ErrorType::Cancelled,
                    "the task was cancelled by cancel_task",
                )),
            )
        }
    } else if timed_out.load(Ordering::SeqCst) {
        let ms = task.plan.options.timeout.unwrap_or(0);
        (
            TaskEvent::Fail,
            Some(HubError::new(
                ErrorType::Timeout,
                format!("the batch did not finish within options.timeout ({ms} ms)"),
            )),
        )
    } else if any_failed {
        (TaskEvent::Fail, None)
    } else {
        (TaskEvent::Succeed, None)
    };
    task.with(|d| d.error = err.clone());
    let final_state = task.transition(ev).unwrap_or_else(|| task.state());
    engine.persist_state(&task);
    emit_state(&task, None);
    let completed = task.steps_completed();
    let mut msg = json!({
        "type": "batch_complete",
        "batchId": task.batch_id,
        "taskId": task.id,
        "success": final_state == TaskState::Success,
        "state": final_state,
        "stepsCompleted": completed,
        "totalSteps": total,
    });
    if resumed {
        msg["resumed"] = json!(true);
    }
    if let Some(e) = err {
        msg["error"] = json!(e);
    }
    tracing::info!(state = ?final_state, completed, total, "task finished");
    engine.task_finished(&task);
    // `End` synced everything; a run that ends without one (or whose
    // journal failed) sends what it holds here, before anyone is told.
    engine.flush(&task);
    task.finished.send_modify(|n| *n += 1);
    drop(hold);
    task.emit(msg);
}

/// Run step `i`; returns whether it succeeded (a skipped step counts as ok).
async fn run_step(
    engine: &Engine,
    task: &Arc<Task>,
    i: usize,
    batch_cancel: &CancellationToken,
    timed_out: &AtomicBool,
    resumed: bool,
    stopped_at: Option<usize>,
) -> bool {
    let hub = engine.hub();
    let planned = &task.plan.steps[i];
    let step = &planned.step;
    let templates = engine.templates();
    // The context (variables and every saved result so far) is copied only
    // for a step that reads it: a `when`, or params with a template.
    let templated = super::template::Templates::is_templated(&step.params);
    let (ctx, last_success) = if planned.when.is_some() || templated {
        task.with(|d| (Value::Object(d.ctx.clone()), d.last_success))
    } else {
        (Value::Null, None)
    };
    let base = step_base(task, i);
    if let Some(cond) = &planned.when {
        let eval = cond.evaluate(&EvalCtx {
            last_success,
            stopped_at,
            vars: &ctx,
            templates,
        });
        match eval {
            Ok((true, _)) => {}
            Ok((false, reason)) => {
                let mut msg = base;
                msg["success"] = json!(true);
                msg["skipped"] = json!(true);
                msg["reason"] = json!(reason);
                if let Some(name) = &step.save_as {
                    task.with(|d| {
                        d.ctx.insert(name.clone(), json!({"result": null, "success": false, "skipped": true, "error": null}))
                    });
                }
                finish_step(engine, task, i, StepState::Skipped, msg, None, resumed);
                return true;
            }
            Err(e) => {
                let out = CallOutcome::failed(&step.tool, e.to_hub_error(), Duration::ZERO);
                return record(engine, task, i, base, out, resumed, None).await;
            }
        }
    }
    let rendered = if templated {
        templates.render_params(&step.params, &ctx)
    } else {
        Ok(step.params.clone())
    };
    let params = match rendered {
        Ok(p) => p,
        Err(e) => {
            let out = CallOutcome::failed(
                &step.tool,
                e.to_hub_error().with_tool(&step.tool),
                Duration::ZERO,
            );
            return record(engine, task, i, base, out, resumed, None).await;
        }
    };
    let session = task
        .session()
        .unwrap_or_else(|| format!("task:{}", task.id).into());
    let mut req = CallRequest::new(
        step.tool.clone(),
        params,
        session,
        batch_cancel.child_token(),
    );
    req.timeout = step.timeout.map(Duration::from_millis);
    req.context = task.context();
    req.view = task.view.get().cloned();
    // The principal that made the task: its steps are that client's calls.
    req.client = task.client();
    // An MCP task's client answers its servers' questions (tasks/update).
    if let Some(q) = task.questions.get() {
        req.link = Some(q.link(req.session.as_str()));
    }
    req.retry = planned.retry.clone();
    req.on_retry = Some(crate::hub::RetryHook(Arc::new({
        let (engine, task) = (engine.clone(), task.clone());
        move |_r: &crate::retry::RetryRecord| {
            if task.state() == TaskState::Running && task.transition(TaskEvent::Retry).is_some() {
                engine.persist_state(&task);
                emit_state(&task, Some(i));
                // The backoff may be long: the client hears of it now.
                engine.flush(&task);
            }
        }
    })));
    // The pipeline: resolve, the safety gate (deny at once, or `need_user`
    // and a person's confirm), then the call with the step's `expect` as
    // the judge of each attempt.
    let gate = StepGate {
        engine,
        task,
        i,
        params: &req.params,
        asked: AtomicBool::new(false),
    };
    let expect = planned.expect.clone();
    let judge = move |r| match &expect {
        None => r,
        Some(x) => apply_expect(x, r),
    };
    let mut out = hub.call(&req, Approval::Ask(&gate), judge).await;
    gate.answered();
    if task.state() == TaskState::Retrying && task.transition(TaskEvent::RetryDone).is_some() {
        engine.persist_state(task);
        emit_state(task, Some(i));
    }
    if !out.success && timed_out.load(Ordering::SeqCst) {
        let ms = task.plan.options.timeout.unwrap_or(0);
        out.error = Some(
            HubError::new(
                ErrorType::Timeout,
                format!("the batch did not finish within options.timeout ({ms} ms)"),
            )
            .with_tool(&step.tool),
        );
    }
    record(engine, task, i, base, out, resumed, Some(&req.params)).await
}

/// The gate's side of a step: a confirmation is the task's `need_user`
/// (state, journal, the question to the owner), and the step starts
/// (journaled before the call) once the gate lets it through.
struct StepGate<'a> {
    engine: &'a Engine,
    task: &'a Arc<Task>,
    i: usize,
    params: &'a Value,
    asked: AtomicBool,
}

impl StepGate<'_> {
    /// The question, if one was asked, is over: back to running.
    fn answered(&self) {
        if self.asked.swap(false, Ordering::SeqCst) {
            leave_need_user(self.engine, self.task, self.i);
        }
    }
}

impl Confirmer for StepGate<'_> {
    fn confirm<'a>(&'a self, q: Question<'a>) -> Decision<'a> {
        Box::pin(async move {
            let (info, params, reason) = (q.info, q.params, q.reason);
            let (engine, task) = (self.engine, self.task);
            self.asked.store(true, Ordering::SeqCst);
            enter_need_user(engine, task, self.i, &reason, params);
            let ask = super::confirm::Confirmation {
                subject: Subject::Step {
                    task_id: &task.id,
                    batch_id: &task.batch_id,
                    step_index: self.i,
                },
                info,
                params,
                owner: task.owner(),
                client: task.client(),
            };
            super::confirm::request(engine, &ask, &reason).await
        })
    }

    /// Resolving waits for a server: nothing stays held meanwhile.
    fn waiting(&self) {
        self.engine.flush(self.task);
    }

    fn admitted(&self) {
        self.answered();
        let i = self.i;
        self.task.with(|d| {
            if let Some(n) = d.steps[i].state.next(StepEvent::Start) {
                d.steps[i].state = n;
            }
        });
        self.engine.persist_step_started(self.task, i, self.params);
    }
}

/// Judge an attempt by the step's `expect`: a miss becomes ASSERTION_FAILED
/// (recoverable, so it is retried per `retry.strategies`); `{"success": false}`
/// turns an expected failure into a success.
pub fn apply_expect(
    x: &super::expect::Expectations,
    r: Result<Value, HubError>,
) -> Result<Value, HubError> {
    match r {
        Ok(v) => match x.check(true, &v, None) {
            Ok(()) => Ok(v),
            Err(msg) => Err(HubError::new(ErrorType::AssertionFailed, msg)),
        },
        Err(e) if x.expects_failure() => match x.check(false, &Value::Null, Some(&e)) {
            Ok(()) => Ok(json!({"expectedFailure": e})),
            Err(msg) => Err(HubError::new(ErrorType::AssertionFailed, msg)),
        },
        Err(e) => Err(e),
    }
}
