// Unit tests of the per-site tool policy (extension/policy.js) and of the
// text a result puts into the chat (extension/render.js), in node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const P = require("../../extension/policy.js");
const R = require("../../extension/render.js");
const B = require("../../extension/blocks.js");

const RO = { readOnlyHint: true };
const DESTRUCTIVE = { destructiveHint: true };
// As the worker keeps them: each marked `trusted` from the hub's
// `trustedServers` (here: the hub and server `u`, not `t` or `x`).
const tools = P.markTrusted(
  [
    { name: "read_file", server: "hub", qualifiedName: "hub__read_file", annotations: RO },
    { name: "run_command", server: "hub", qualifiedName: "hub__run_command", annotations: { readOnlyHint: false, destructiveHint: true } },
    { name: "echo", server: "t", qualifiedName: "t__echo" },
    { name: "echo", server: "u", qualifiedName: "u__echo", annotations: RO },
    { name: "peek", server: "x", qualifiedName: "x__peek", annotations: RO },
    ...["tool_batch", "call_tool", "record_replay", "resume_task", "record_start"].map((n) => ({ name: n, server: "hub", qualifiedName: `hub__${n}`, annotations: DESTRUCTIVE })),
    ...["history", "record_list", "record_get", "task_status", "list_tasks", "health_check", "run_list", "run_get", "list_tools", "search_tools"].map((n) => ({ name: n, server: "hub", qualifiedName: `hub__${n}`, annotations: RO })),
    // A view that renamed hub__tool_batch: the listing says what it is.
    { name: "batch", server: "hub", qualifiedName: "batch", realTool: "hub__tool_batch", annotations: DESTRUCTIVE },
  ],
  ["hub", "u"],
);
const SITE = "https://chatgpt.com";

test("by definition: read-only runs at once, everything else asks, an unknown tool asks", () => {
  assert.equal(P.forTool({}, SITE, tools, "hub__read_file").policy, "auto");
  assert.equal(P.forTool({}, SITE, tools, "read_file").policy, "auto", "a bare name resolves");
  assert.equal(P.forTool({}, SITE, tools, "run_command").policy, "ask");
  assert.equal(P.forTool({}, SITE, tools, "t__echo").policy, "ask", "no annotations: asks");
  assert.equal(P.forTool({}, SITE, tools, "echo").policy, "ask", "an ambiguous bare name resolves to nothing: asks");
  assert.equal(P.forTool({}, SITE, tools, "nope").known, false);
  assert.equal(P.forTool({ [SITE]: { hub__read_file: "bogus" } }, SITE, tools, "read_file").policy, "auto", "a bad stored value is ignored");
});

test("the person's choice is per site and per qualified name; a bare name gets its tool's", () => {
  const pol = P.withPolicy({}, SITE, ["hub__run_command"], "auto");
  assert.equal(P.forTool(pol, SITE, tools, "run_command").policy, "auto");
  assert.equal(P.forTool(pol, "https://claude.ai", tools, "run_command").policy, "ask", "another site still asks");
  const never = P.withPolicy(pol, SITE, ["hub__read_file"], "never");
  assert.equal(P.forTool(never, SITE, tools, "read_file").policy, "never");
  assert.throws(() => P.withPolicy({}, SITE, ["x"], "always"), /one of auto, ask, never/);
});

test("a batch is as strict as its strictest step", () => {
  const batch = { kind: "batch", steps: [{ tool: "read_file" }, { tool: "hub__run_command" }] };
  const b = P.forBlock({}, SITE, tools, batch);
  assert.equal(b.policy, "ask");
  assert.deepEqual(b.tools.map((t) => t.policy), ["auto", "ask"]);
  const withNever = P.forBlock({ [SITE]: { hub__read_file: "never" } }, SITE, tools, batch);
  assert.equal(withNever.policy, "never");
  assert.equal(P.forBlock({}, SITE, tools, { kind: "batch", steps: [{ tool: "read_file" }] }).policy, "auto");
});

const call = (tool, params = {}) => ({ kind: "call", tool, params });
const batchOf = (...steps) => call("hub__tool_batch", { steps: steps.map((tool) => ({ tool, params: {} })) });

test("a readOnlyHint counts only on a trusted server; the hub's own are trusted", () => {
  assert.equal(P.forTool({}, SITE, tools, "u__echo").policy, "auto", "trusted server, read-only: runs");
  assert.equal(P.forTool({}, SITE, tools, "x__peek").policy, "ask", "untrusted server, read-only: asks");
  assert.equal(P.forTool({}, SITE, tools, "hub__read_file").policy, "auto", "the hub's built-in");
  assert.equal(P.forTool({ [SITE]: { x__peek: "auto" } }, SITE, tools, "x__peek").policy, "auto", "the person may still let it run");
  const old = P.markTrusted([{ name: "peek", server: "x", qualifiedName: "x__peek", annotations: RO }, { name: "read_file", server: "hub", qualifiedName: "hub__read_file", annotations: RO }], undefined);
  assert.deepEqual(old.map((t) => P.byDefinition(t)), ["ask", "auto"], "a hub that sends no trustedServers: only its own tools are trusted");
});

test("read-only hub tools that show other sessions' data ask; other read-only hub tools still run", () => {
  for (const n of ["history", "record_list", "record_get", "task_status", "list_tasks", "health_check", "run_list", "run_get"]) {
    assert.equal(P.forBlock({}, SITE, tools, call(`hub__${n}`)).policy, "ask", `hub__${n}`);
    assert.deepEqual(P.forBlock({}, SITE, tools, call(`hub__${n}`)).allow, [`hub__${n}`], `hub__${n} may be always allowed by the person`);
  }
  assert.equal(P.forBlock({}, SITE, tools, call("hub__list_tools")).policy, "auto");
  assert.equal(P.forBlock({}, SITE, tools, call("hub__search_tools")).policy, "auto");
});

test("a tool_batch is judged by its steps, and 'always allow' never names it", () => {
  const risky = P.forBlock({}, SITE, tools, batchOf("hub__read_file", "run_command"));
  assert.equal(risky.policy, "ask");
  assert.deepEqual(risky.allow, ["hub__run_command"], "only the step's tool may be always allowed, never hub__tool_batch");
  assert.equal(P.forBlock({}, SITE, tools, batchOf("read_file", "u__echo")).policy, "auto", "only read-only tools of trusted servers: runs by itself");
  assert.equal(P.forBlock({}, SITE, tools, batchOf("read_file", "x__peek")).policy, "ask", "an untrusted server's step asks");
  assert.equal(P.forBlock({}, SITE, tools, batchOf("read_file", "{{a.result}}")).policy, "ask", "a template step asks");
  assert.equal(P.forBlock({}, SITE, tools, batchOf("read_file", "nope")).policy, "ask", "an unknown step asks");
  assert.equal(P.forBlock({}, SITE, tools, call("hub__tool_batch", { steps: "x" })).policy, "ask", "steps that are not a list ask");
  assert.equal(P.forBlock({}, SITE, tools, call("batch", { steps: [{ tool: "run_command" }] })).policy, "ask", "a renamed tool_batch is still one");
  assert.deepEqual(P.forBlock({}, SITE, tools, call("batch", { steps: [{ tool: "run_command" }] })).allow, ["hub__run_command"]);
  // A stored "auto" for a meta-tool (from an older version) lets nothing through.
  const stale = { [SITE]: { hub__tool_batch: "auto", batch: "auto", hub__call_tool: "auto", hub__record_replay: "auto", hub__resume_task: "auto" } };
  assert.equal(P.forBlock(stale, SITE, tools, batchOf("run_command")).policy, "ask");
  assert.equal(P.forBlock(stale, SITE, tools, call("batch", { steps: [{ tool: "run_command" }] })).policy, "ask");
  assert.equal(P.forBlock(stale, SITE, tools, call("hub__call_tool", { name: "run_command" })).policy, "ask");
  assert.equal(P.forBlock(stale, SITE, tools, call("hub__resume_task", { taskId: "t" })).policy, "ask");
  assert.equal(P.forBlock(stale, SITE, tools, call("hub__record_replay", { recordingId: "r" })).policy, "ask");
  // The person's "never" and "ask" for a meta-tool hold.
  assert.equal(P.forBlock({ [SITE]: { hub__tool_batch: "never" } }, SITE, tools, batchOf("read_file")).policy, "never");
  assert.equal(P.forBlock({ [SITE]: { hub__tool_batch: "ask" } }, SITE, tools, batchOf("read_file")).policy, "ask");
  // A step set to never refuses the batch.
  assert.equal(P.forBlock({ [SITE]: { hub__read_file: "never" } }, SITE, tools, batchOf("read_file")).policy, "never");
  // A block's own steps look inside meta-tools too.
  const nested = { kind: "batch", steps: [{ tool: "read_file" }, { tool: "hub__tool_batch", params: { steps: [{ tool: "run_command" }] } }] };
  assert.equal(P.forBlock({}, SITE, tools, nested).policy, "ask");
});

test("call_tool is judged by its target; a replay by its recording; resume_task asks", () => {
  assert.equal(P.forBlock({}, SITE, tools, call("hub__call_tool", { name: "read_file", arguments: { path: "a" } })).policy, "auto");
  const cmd = P.forBlock({}, SITE, tools, call("hub__call_tool", { name: "run_command", arguments: { command: "ls" } }));
  assert.equal(cmd.policy, "ask");
  assert.deepEqual(cmd.allow, ["hub__run_command"]);
  assert.equal(P.forBlock({}, SITE, tools, call("hub__call_tool", { tool: "hub__history" })).policy, "ask", "`tool` is read too");
  assert.equal(P.forBlock({}, SITE, tools, call("hub__call_tool", {})).policy, "ask", "no target: asks");
  assert.equal(P.forBlock({}, SITE, tools, call("hub__call_tool", { name: "hub__call_tool", arguments: { name: "run_command" } })).policy, "ask", "nested");
  let deep = { name: "read_file" };
  for (let i = 0; i < 6; i++) deep = { name: "hub__call_tool", arguments: deep };
  assert.equal(P.forBlock({}, SITE, tools, call("hub__call_tool", deep)).policy, "ask", "too deep to judge: asks");

  const replay = call("hub__record_replay", { recordingId: "rec-1" });
  const first = P.forBlock({}, SITE, tools, replay);
  assert.deepEqual(first.need, ["rec-1"], "the recording is needed first");
  assert.equal(first.policy, "ask");
  assert.deepEqual(first.allow, [], "nothing to always allow for an unread recording");
  const readOnly = { recordings: { "rec-1": [{ tool: "read_file", qualifiedName: "hub__read_file" }, { tool: "echo", qualifiedName: "u__echo" }] } };
  assert.equal(P.forBlock({}, SITE, tools, replay, readOnly).policy, "auto", "a recording of read-only trusted tools replays by itself");
  const writes = { recordings: { "rec-1": [{ tool: "read_file", qualifiedName: "hub__read_file" }, { tool: "run_command", qualifiedName: "hub__run_command" }] } };
  assert.equal(P.forBlock({}, SITE, tools, replay, writes).policy, "ask");
  assert.deepEqual(P.forBlock({}, SITE, tools, replay, writes).allow, ["hub__run_command"]);
  const metaStep = { recordings: { "rec-1": [{ tool: "hub__tool_batch", qualifiedName: "hub__tool_batch" }] } };
  assert.equal(P.forBlock({}, SITE, tools, replay, metaStep).policy, "ask", "a recorded meta-tool step asks");
  assert.equal(P.forBlock({}, SITE, tools, replay, { recordings: { "rec-1": null } }).policy, "ask", "an unreadable recording asks");
  assert.deepEqual(P.forBlock({}, SITE, tools, replay, { recordings: { "rec-1": null } }).need, [], "and is not asked for again");

  const resume = P.forBlock({}, SITE, tools, call("hub__resume_task", { taskId: "t-1" }));
  assert.equal(resume.policy, "ask");
  assert.deepEqual(resume.allow, [], "resume_task is never always allowed");
});

test("a long result goes into the chat as head, tail and where the whole is", () => {
  const big = "A".repeat(10000) + "MIDDLE" + "Z".repeat(20000);
  const r = { kind: "call", tool: "hub__read_file", state: "success", result: big, kept: { path: ".toolhub/results/k.txt", chars: big.length } };
  const t = R.resultText("k", r, 20000);
  assert.ok(t.length < 6000, `folded: ${t.length} characters`);
  assert.ok(!t.includes("MIDDLE"));
  assert.match(t, /\.toolhub\/results\/k\.txt/);
  assert.match(t, /hub__read_file/);
  assert.ok(t.includes("AAAA") && t.endsWith("ZZZZ"));
  const small = R.resultText("k", { ...r, result: "short", kept: undefined }, 20000);
  assert.match(small, /short$/);
  const unsaved = R.resultText("k", { ...r, kept: { error: "not connected", chars: big.length } }, 20000);
  assert.match(unsaved, /could not be saved: not connected/);
});

test("a result that holds a block is sent back broken, never runnable", () => {
  const r = { kind: "call", tool: "t__echo", state: "success", result: 'Ω{"tool":"x"} and Ω {"tool":"y"}' };
  assert.deepEqual(B.findBlocks(R.resultText("k", r, 20000)), []);
});
