// toolhub extension, service worker: what each frame from the hub does to
// the pending calls (results, batch steps, approvals, tool lists), and how a
// call's record reaches the tabs that asked for it. Loaded by sw.js with
// importScripts; shares its globals.
"use strict";
function short(id) {
  return String(id || "").slice(0, 8);
}

/** The effect of one frame. Idempotent: a frame handled twice changes nothing more. */
async function handle(m) {
  if (m.replyTo !== undefined && rpcs.has(m.replyTo)) {
    const r = rpcs.get(m.replyTo);
    rpcs.delete(m.replyTo);
    r.resolve(m);
  }
  switch (m.type) {
    case "pong":
      if (m.replyTo === "keepalive") conn.pingOut = null;
      return;
    case "tools":
    case "tools_updated":
      if (Array.isArray(m.tools)) {
        // A discovery view lists its meta-tools and names the rest in
        // `catalog` (name, server, a short summary each).
        // `trustedServers`: whose annotations count (policy.js).
        tools = { tools: ToolhubPolicy.markTrusted(m.tools.map(slimTool), m.trustedServers), hash: m.hash || null, catalog: Array.isArray(m.catalog) ? m.catalog : null };
        await persistMisc();
        notifyUi();
      }
      return;
    case "server_status": {
      const i = servers.findIndex((s) => s.name === m.name);
      const s = { name: m.name, state: m.state, toolCount: m.toolCount };
      if (i >= 0) servers[i] = s;
      else servers.push(s);
      await persistMisc();
      notifyUi();
      return;
    }
    case "health_status":
      if (Array.isArray(m.servers)) {
        servers = m.servers.map((s) => ({ name: s.name, state: s.state, toolCount: s.toolCount }));
        await persistMisc();
      }
      return;
    case "tool_result":
      if (pending.has(m.replyTo)) await finish(m.replyTo, m);
      return;
    case "task_state": {
      const e = pending.get(m.batchId);
      if (!e) return;
      e.taskId = m.taskId;
      e.state = m.state === "need_user" ? "need_user" : "running";
      if (m.state !== "need_user") e.needUser = null;
      await persistPending(e);
      push(e);
      return;
    }
    case "batch_step_result": {
      const e = pending.get(m.batchId);
      if (!e) return;
      e.taskId = m.taskId || e.taskId;
      const step = slimStep(m);
      if (m.success && !m.skipped) {
        const kept = await Trust.keep(`${e.key}-s${m.stepIndex}`, m.result, request);
        if (kept) step.kept = kept;
      }
      e.steps[m.stepIndex] = step;
      await persistPending(e);
      push(e);
      return;
    }
    case "batch_complete":
      if (pending.has(m.batchId)) await finish(m.batchId, m);
      return;
    case "task":
      // A repeated tool_batch (deduplicated) or a task_status asked after a
      // long absence: the task as the hub has it.
      if (pending.has(m.replyTo) && m.task) await finish(m.replyTo, fromTask(m));
      return;
    case "need_user": {
      const key = needUserKey(m);
      approvals.set(m.taskId, { ...m, key });
      await persistMisc();
      const e = key && pending.get(key);
      if (e) {
        e.state = "need_user";
        e.needUser = { taskId: m.taskId, stepIndex: m.stepIndex, tool: m.tool, reason: m.reason, expiresAt: m.expiresAt };
        if (m.batchId) e.taskId = m.taskId;
        await persistPending(e);
      }
      updateBadge();
      if (e) push(e);
      notifyUi();
      return;
    }
    case "replay_step_result":
      PanelSw.step(m);
      return;
    case "confirmed":
      if (approvals.delete(m.taskId)) {
        await persistMisc();
        updateBadge();
        notifyUi();
      }
      return;
    case "error":
      if (pending.has(m.replyTo)) await finish(m.replyTo, { success: false, error: m.error });
      return;
    default:
      return;
  }
}

function slimTool(t) {
  const s = { name: t.name, server: t.server, qualifiedName: t.qualifiedName, description: t.description, inputSchema: t.inputSchema };
  if (t.annotations) s.annotations = t.annotations;
  if (t.realTool) s.realTool = t.realTool;
  return s;
}

function slimStep(m) {
  const s = { stepIndex: m.stepIndex, stepId: m.stepId ?? null, tool: m.tool, success: !!m.success };
  if (m.skipped) {
    s.skipped = true;
    s.reason = m.reason;
  }
  if (m.result !== undefined) s.result = trimValue(m.result);
  if (m.error) s.error = m.error;
  if (m.attempts !== undefined) s.attempts = m.attempts;
  if (m.durationMs !== undefined) s.durationMs = m.durationMs;
  return s;
}

/** A `task` (task_status's shape) as a batch's end. */
function fromTask(m) {
  const t = m.task;
  const active = ["pending", "running", "retrying", "need_user"].includes(t.state);
  return {
    success: t.state === "success",
    state: t.state,
    steps: (t.steps || []).filter((s) => s.state && s.state !== "pending" && s.state !== "running").map((s) => slimStep({ ...s, success: s.success ?? s.state === "success", skipped: s.state === "skipped" || s.skipped })),
    deduplicated: !!m.deduplicated,
    stillActive: active,
    error: t.error,
    taskId: t.taskId,
  };
}

/** The block a need_user belongs to: a batch by its batchId; a single call
 * (whose need_user names no key) by its tool and params. */
function needUserKey(m) {
  if (m.batchId && pending.has(m.batchId)) return m.batchId;
  if (m.batchId) return null;
  const same = (e) => e.kind === "call" && (e.tool === m.tool || (m.tool || "").endsWith("__" + e.tool));
  const cands = [...pending.values()].filter((e) => same(e) && !e.needUser);
  const exact = cands.find((e) => canonical(e.msg.params) === canonical(m.params));
  return (exact || cands[0] || {}).key || null;
}

function canonical(v) {
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return "[" + v.map(canonical).join(",") + "]";
  return "{" + Object.keys(v).sort().map((k) => JSON.stringify(k) + ":" + canonical(v[k])).join(",") + "}";
}

/** A call or batch is over: store its record, then forget it as pending
 * (in that order: a worker stopped in between sends it again, and the
 * repeat is answered from the hub's key store), then tell its tabs. */
async function finish(key, m) {
  const e = pending.get(key);
  if (!e) return;
  if (m.stillActive) {
    // A task_status that came back early (should not happen with wait).
    return;
  }
  const steps = { ...e.steps };
  for (const s of m.steps || []) if (steps[s.stepIndex] === undefined) steps[s.stepIndex] = s;
  const record = {
    key,
    kind: e.kind,
    tool: e.tool,
    totalSteps: e.totalSteps,
    state: m.success ? "success" : "error",
    result: m.result !== undefined ? trimValue(m.result) : undefined,
    error: m.error || null,
    steps,
    stepsCompleted: m.stepsCompleted,
    taskState: m.state || null,
    deduplicated: !!m.deduplicated,
    attempts: m.attempts,
    durationMs: m.durationMs,
    finishedAt: Date.now(),
  };
  if (m.success && m.result !== undefined) {
    const kept = await Trust.keep(key, m.result, request);
    if (kept) record.kept = kept;
  }
  await saveResult(record);
  pending.delete(key);
  await chrome.storage.session.remove("p:" + key);
  let changed = false;
  for (const [taskId, a] of approvals) {
    if (a.key === key) {
      approvals.delete(taskId);
      changed = true;
    }
  }
  if (changed) await persistMisc();
  for (const t of e.tabs) deliver(t, record);
  updateBadge();
  notifyUi();
}

function recordOf(e) {
  return {
    key: e.key,
    kind: e.kind,
    tool: e.tool,
    totalSteps: e.totalSteps,
    state: e.state,
    steps: e.steps,
    needUser: e.needUser || null,
    note: conn.state === "connected" ? null : `waiting for the hub: ${conn.message || conn.state}`,
  };
}

function push(e) {
  const record = recordOf(e);
  for (const t of e.tabs) deliver(t, record);
  notifyUi();
}

/** Results go only to the tabs that asked for this block. */
function deliver(t, record) {
  chrome.tabs.sendMessage(t.tabId, { type: "toolhub-update", record }, { frameId: t.frameId }).catch(() => {});
}

function subscribe(e, sender) {
  const t = { tabId: sender.tab.id, frameId: sender.frameId || 0 };
  if (!e.tabs.some((x) => x.tabId === t.tabId && x.frameId === t.frameId)) {
    e.tabs.push(t);
    return true;
  }
  return false;
}
