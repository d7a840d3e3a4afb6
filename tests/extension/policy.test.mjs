// Unit tests of the per-site tool policy (extension/policy.js) and of the
// text a result puts into the chat (extension/render.js), in node.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const P = require("../../extension/policy.js");
const R = require("../../extension/render.js");
const B = require("../../extension/blocks.js");

const tools = [
  { name: "read_file", server: "hub", qualifiedName: "hub__read_file", annotations: { readOnlyHint: true } },
  { name: "run_command", server: "hub", qualifiedName: "hub__run_command", annotations: { readOnlyHint: false, destructiveHint: true } },
  { name: "echo", server: "t", qualifiedName: "t__echo" },
  { name: "echo", server: "u", qualifiedName: "u__echo", annotations: { readOnlyHint: true } },
];
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
