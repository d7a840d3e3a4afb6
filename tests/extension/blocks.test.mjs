// Unit tests of the extension's block parser (extension/blocks.js), in node:
//   node --test tests/extension/blocks.test.mjs
// Run by `cargo test` too (tests/it/extension.rs).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const B = require("../../extension/blocks.js");

const complete = (text) => B.findBlocks(text).filter((b) => b.complete);

test("a single call", () => {
  const [b, ...rest] = B.findBlocks('Let me look. Ω{"tool":"read_file","params":{"path":"a.txt"}} …');
  assert.equal(rest.length, 0);
  assert.equal(b.complete, true);
  assert.equal(b.kind, "call");
  assert.equal(b.tool, "read_file");
  assert.deepEqual(b.params, { path: "a.txt" });
  assert.equal(b.start, 13);
});

test("a batch in the hub's tool_batch form", () => {
  const text = 'Ω{"steps":[{"id":"a","tool":"echo","params":{"message":"x"},"saveAs":"a"},' +
    '{"tool":"echo","params":{"message":"{{a.result}}!"}}],"options":{"stopOnError":true}}';
  const [b] = complete(text);
  assert.equal(b.kind, "batch");
  assert.equal(b.steps.length, 2);
  assert.deepEqual(b.options, { stopOnError: true });
  const m = B.hubMessage(b, "th-k-0");
  assert.equal(m.type, "tool_batch");
  assert.equal(m.callKey, "th-k-0");
  assert.equal(m.id, "th-k-0");
  assert.equal(m.steps[1].params.message, "{{a.result}}!");
});

test("streamed halves: no prefix is a complete block, the whole is", () => {
  const full = 'Sure. Ω{"tool":"echo","params":{"message":"a {nested} } brace","n":[1,{"x":2}]}} done';
  const end = full.indexOf(" done");
  for (let cut = 0; cut < end; cut++) {
    const blocks = B.findBlocks(full.slice(0, cut));
    assert.equal(blocks.filter((b) => b.complete).length, 0, `prefix of ${cut} chars`);
  }
  const first = full.slice(0, Math.floor(end / 2));
  const [half] = B.findBlocks(first);
  assert.equal(half.complete, false);
  const [b] = complete(full);
  assert.equal(b.params.message, "a {nested} } brace");
  assert.equal(b.end, end);
});

test("blocks inside code fences, on one line or over several", () => {
  const one = "Here:\n```json\nΩ{\"tool\":\"echo\",\"params\":{\"message\":\"hi\"}}\n```\nThat's it.";
  assert.equal(complete(one)[0].params.message, "hi");
  const multi = "```\nΩ{\n  \"tool\": \"echo\",\n  \"params\": {\n    \"message\": \"multi\"\n  }\n}\n```";
  const [b] = complete(multi);
  assert.equal(b.kind, "call");
  assert.equal(b.params.message, "multi");
  assert.ok(!b.body.includes("```"), "the fence is not part of the block");
});

test("HTML entities: quotes, ampersands and braces inside entity-quoted strings", () => {
  const text = "Ω{&quot;tool&quot;:&quot;echo&quot;,&quot;params&quot;:{&quot;message&quot;:&quot;a &amp; b }{&quot;}}";
  const [b] = complete(text);
  assert.equal(b.error, undefined, b.error);
  assert.equal(b.params.message, "a & b }{");
  assert.equal(b.end, text.length);
  const numeric = "Ω{&#34;tool&#34;:&#x22;echo&#x22;,&#34;params&#34;:{}}";
  assert.equal(complete(numeric)[0].tool, "echo");
  // A real `&amp;` in a well-formed block stays as written.
  const literal = 'Ω{"tool":"echo","params":{"message":"a &amp; b"}}';
  assert.equal(complete(literal)[0].params.message, "a &amp; b");
});

test("two blocks in one message, each with its own position", () => {
  const text = 'First Ω{"tool":"echo","params":{"message":"1"}} then Ω{"tool":"echo","params":{"message":"2"}}.';
  const bs = complete(text);
  assert.equal(bs.length, 2);
  assert.deepEqual(bs.map((b) => b.params.message), ["1", "2"]);
  assert.ok(bs[0].end <= bs[1].start);
});

test("invalid JSON gives a readable error that points at the spot", () => {
  const [b] = complete('Ω{"tool":"echo", params: {"message":"x"}}');
  assert.equal(b.complete, true);
  assert.equal(b.kind, undefined);
  assert.match(b.error, /not valid JSON/);
  assert.match(b.error, /⟨here⟩ "params: /);
  const [c] = complete('Ω{"tool":"echo","params":{"message":"x",}}');
  assert.match(c.error, /not valid JSON/);
});

test("a block of the wrong shape says what a block needs", () => {
  assert.match(complete('Ω{"name":"echo"}')[0].error, /needs "tool".*or "steps"/);
  assert.match(complete('Ω{"steps":[]}')[0].error, /non-empty array/);
  assert.match(complete('Ω{"steps":[{"params":{}}]}')[0].error, /step 0 needs a "tool"/);
  assert.match(complete('Ω{"tool":"echo","params":"x"}')[0].error, /"params" must be an object/);
  assert.match(complete("Ω[1,2]").concat([{ error: "none" }])[0].error, /none/, "Ω[ is not a block");
});

test("nested braces and escaped quotes inside strings", () => {
  const text = String.raw`Ω{"tool":"write_file","params":{"path":"f.js","content":"function f() { return {a: \"}\"}; }"}}`;
  const [b] = complete(text);
  assert.equal(b.error, undefined, b.error);
  assert.equal(b.params.content, 'function f() { return {a: "}"}; }');
  assert.equal(b.end, text.length);
});

test("an Ω inside a block's string is part of that block", () => {
  const bs = complete('Ω{"tool":"echo","params":{"message":"see Ω{\\"tool\\":1}"}}');
  assert.equal(bs.length, 1);
  assert.equal(bs[0].params.message, 'see Ω{"tool":1}');
});

test("the ohm sign, spaces after the marker, typographic quotes", () => {
  assert.equal(complete('\u2126{"tool":"echo"}')[0].tool, "echo");
  assert.equal(complete('Ω \u00a0{"tool":"echo"}')[0].tool, "echo");
  assert.equal(complete("Ω{\u201ctool\u201d:\u201cecho\u201d}")[0].tool, "echo");
  assert.equal(B.findBlocks("Ω means ohms; Ω alone").length, 0);
});

test("keys: same page and content give the same key; whitespace does not matter; position does", () => {
  const a = complete('Ω{"tool":"echo","params":{"message":"x"}}')[0];
  const b = complete('Ω{ "tool" : "echo",\n "params" : { "message" : "x" } }')[0];
  const ka = B.blockKey("http://h/chat/1", B.blockContent(a), 0);
  assert.equal(ka, B.blockKey("http://h/chat/1", B.blockContent(b), 0));
  assert.notEqual(ka, B.blockKey("http://h/chat/2", B.blockContent(a), 0));
  assert.notEqual(ka, B.blockKey("http://h/chat/1", B.blockContent(a), 1));
  assert.match(ka, /^th-[0-9a-f]{16}-0$/);
  assert.ok(ka.length <= 200, "a valid callKey");
  // Entities or not, the same call has the same key.
  const e = complete("Ω{&quot;tool&quot;:&quot;echo&quot;,&quot;params&quot;:{&quot;message&quot;:&quot;x&quot;}}")[0];
  assert.equal(B.blockKey("p", B.blockContent(e), 0), B.blockKey("p", B.blockContent(a), 0));
  // An invalid block still has a stable key.
  const bad = complete("Ω{oops}")[0];
  assert.equal(B.blockContent(bad), "{oops}");
});

test("hubMessage for a single call carries callKey, params and timeout", () => {
  const [b] = complete('Ω{"tool":"slow","params":{"ms":5},"timeout":9000}');
  assert.deepEqual(B.hubMessage(b, "k"), {
    type: "tool_call", id: "k", callKey: "k", tool: "slow", params: { ms: 5 }, timeout: 9000,
  });
  const [c] = complete('Ω{"tool":"list"}');
  assert.deepEqual(B.hubMessage(c, "k").params, {});
});
