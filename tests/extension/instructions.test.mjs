// Unit tests of the instructions the popup copies (extension/instructions.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const I = require("../../extension/instructions.js");
const B = require("../../extension/blocks.js");

const tools = [
  { name: "echo", server: "t", qualifiedName: "t__echo", description: "Echo the message back. More words here.",
    inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] } },
  { name: "slow", server: "t", qualifiedName: "t__slow", description: "Sleep.",
    inputSchema: { type: "object", properties: { message: { type: "string" }, ms: { type: "integer" } }, required: ["ms"] } },
  { name: "read_file", server: "hub", qualifiedName: "hub__read_file", description: "Read a file inside the workspace",
    inputSchema: { type: "object", properties: { path: { type: "string" }, encoding: { enum: ["utf8", "base64"] },
      lines: { type: "array", items: { type: "integer" } } }, required: ["path"] } },
];

test("one compact line per tool: qualified name, required params first, first sentence", () => {
  const text = I.build(tools);
  assert.match(text, /^t__echo\(message: string\) – Echo the message back\.$/m);
  assert.match(text, /^t__slow\(ms: int, message\?: string\) – Sleep\.$/m);
  assert.match(text, /^hub__read_file\(path: string, encoding\?: "utf8"\|"base64", lines\?: int\[\]\) – Read a file inside the workspace$/m);
  assert.match(text, /\{"tool":"NAME","params":\{"arg":"value"\}\}/);
  assert.match(text, /Tools \(3\)/);
  assert.ok(text.indexOf("[hub]") < text.indexOf("[t]"), "servers sorted");
});

test("a server switched off is left out", () => {
  const text = I.build(tools, { t: true });
  assert.ok(!text.includes("t__echo"));
  assert.match(text, /Tools \(1\)/);
  assert.deepEqual(I.serversOf(tools), [{ name: "hub", count: 1 }, { name: "t", count: 2 }]);
});

test("long descriptions are cut", () => {
  const s = I.summary("x".repeat(300));
  assert.ok(s.length <= 110 && s.endsWith("…"));
});

test("the instructions hold no runnable block: pasted into a chat they call nothing", () => {
  const text = I.build(tools);
  assert.deepEqual(B.findBlocks(text), []);
  assert.ok(!/[\u03A9\u2126]\s*\{/.test(text), "no Ω is followed by {");
  assert.match(text, /Ω sign/);
});

test("they name the policy, and leave out the tools that never run", () => {
  const policy = { t__echo: "auto", t__slow: "never" };
  const text = I.build(tools, {}, (t) => policy[t.qualifiedName] || "ask");
  assert.match(text, /Run at once when you write them: t__echo\./);
  assert.match(text, /Wait until I click Run[^:]*: hub__read_file\./);
  assert.ok(!text.includes("t__slow"), "a never tool is left out");
  assert.match(text, /Tools \(2\)/);
});

test("a discovery view's instructions name its tools one line each, to be called through the meta-tools", () => {
  const meta = [
    { name: "call_tool", server: "hub", qualifiedName: "hub__call_tool", description: "Call a tool by name.",
      inputSchema: { type: "object", properties: { name: { type: "string" }, arguments: { type: "object" } }, required: ["name"] } },
  ];
  const catalog = [{ name: "t__slow", server: "t" }, { name: "t__echo", server: "t" }, { name: "u__x", server: "u" }];
  const text = I.build(meta, { u: true }, () => "ask", catalog);
  assert.match(text, /More tools \(2\), by name only/);
  assert.match(text, /^t__echo$/m);
  assert.match(text, /^t__slow$/m);
  assert.ok(!text.includes("u__x"), "a server switched off is left out of the catalog too");
  assert.ok(text.indexOf("t__echo") < text.indexOf("t__slow"), "names sorted");
  assert.match(text, /hub__call_tool\(name: string, arguments\?: object\)/);
  assert.deepEqual(B.findBlocks(text), [], "nothing in it runs");
});
