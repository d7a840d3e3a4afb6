// Ω{…} blocks: finding them in a chat message's text, parsing their JSON,
// and the key that names a block for good (page + content + position).
//
// Loaded as a classic script by the content script (it sets
// globalThis.ToolhubBlocks) and with require() by the unit tests in node
// (tests/extension/blocks.test.mjs). No DOM in here.
(function (root) {
  "use strict";

  // U+03A9 GREEK CAPITAL LETTER OMEGA, and U+2126 OHM SIGN, which looks the same.
  const OMEGAS = "\u03A9\u2126";
  const SPACE = /[\s\u00a0\u200b\ufeff]/;

  /** Is `c` an opening marker character? */
  function isOmega(c) {
    return OMEGAS.includes(c);
  }

  /**
   * From `text[open]` (a `{`), the index just past the matching `}`, or -1
   * when the text ends first (a block still being streamed). Braces inside
   * JSON strings do not count; backslash escapes inside strings are honoured.
   */
  function matchBraces(text, open) {
    let depth = 0;
    let inString = false;
    for (let i = open; i < text.length; i++) {
      const c = text[i];
      if (inString) {
        if (c === "\\") i++;
        else if (c === '"') inString = false;
        continue;
      }
      if (c === '"') inString = true;
      else if (c === "{") depth++;
      else if (c === "}") {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return -1;
  }

  const NAMED = { quot: '"', amp: "&", lt: "<", gt: ">", apos: "'", nbsp: " ", "#39": "'" };

  /** HTML entities (`&quot;`, `&#34;`, `&#x22;`, `&amp;`…) decoded. */
  function decodeEntities(s) {
    return s.replace(/&(#x[0-9a-fA-F]{1,6}|#[0-9]{1,7}|[a-zA-Z]{2,6}|#39);/g, (m, e) => {
      if (e[0] === "#") {
        const n = e[1] === "x" || e[1] === "X" ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10);
        try {
          return String.fromCodePoint(n);
        } catch {
          return m;
        }
      }
      return Object.prototype.hasOwnProperty.call(NAMED, e) ? NAMED[e] : m;
    });
  }

  /** Typographic quotes a markdown renderer may have put in place of `"`. */
  function straightenQuotes(s) {
    return s.replace(/[\u201c\u201d\u201e\u201f\u2033]/g, '"');
  }

  /** A readable JSON error: the engine's message and the text around the spot. */
  function jsonError(body, err) {
    const msg = String((err && err.message) || err);
    const m = /position (\d+)/.exec(msg);
    let where = "";
    if (m) {
      const at = Number(m[1]);
      const before = body.slice(Math.max(0, at - 25), at);
      const after = body.slice(at, at + 25);
      where = ` near ${JSON.stringify(before)} ⟨here⟩ ${JSON.stringify(after)}`;
    }
    return `the block is not valid JSON: ${msg.replace(/\s*\(line \d+ column \d+\)/, "")}${where}`;
  }

  function isObject(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }

  /**
   * What a parsed block asks for: {kind:"call", tool, params, timeout?} or
   * {kind:"batch", steps, options}; or {error} saying what is wrong.
   */
  function classify(value) {
    if (!isObject(value)) return { error: "a block must be a JSON object: {\"tool\":…,\"params\":{…}} or {\"steps\":[…]}" };
    if ("steps" in value) {
      const steps = value.steps;
      if (!Array.isArray(steps) || steps.length === 0) {
        return { error: "\"steps\" must be a non-empty array of steps, each {\"tool\":…,\"params\":{…}}" };
      }
      for (let i = 0; i < steps.length; i++) {
        if (!isObject(steps[i]) || typeof steps[i].tool !== "string" || !steps[i].tool) {
          return { error: `step ${i} needs a "tool" (a tool name string)` };
        }
        if ("params" in steps[i] && !isObject(steps[i].params)) {
          return { error: `step ${i}: "params" must be an object` };
        }
      }
      if ("options" in value && !isObject(value.options)) return { error: "\"options\" must be an object" };
      return { kind: "batch", steps, options: value.options || {} };
    }
    if (typeof value.tool === "string" && value.tool) {
      if ("params" in value && !isObject(value.params)) return { error: "\"params\" must be an object" };
      const call = { kind: "call", tool: value.tool, params: value.params || {} };
      if (typeof value.timeout === "number") call.timeout = value.timeout;
      return call;
    }
    return { error: "a block needs \"tool\" (one call: {\"tool\":…,\"params\":{…}}) or \"steps\" (a batch: {\"steps\":[…],\"options\":{…}})" };
  }

  /** Parse one block body (`{…}`), trying the raw text, then with entities decoded and quotes straightened. */
  function parseBody(body) {
    let firstErr = null;
    const tries = [body];
    if (/&(#x?[0-9a-fA-F]+|[a-zA-Z]+);/.test(body)) tries.push(decodeEntities(body));
    if (/[\u201c\u201d]/.test(body)) tries.push(straightenQuotes(tries[tries.length - 1]));
    for (const t of tries) {
      try {
        return { value: JSON.parse(t.replace(/\u00a0/g, " ")) };
      } catch (e) {
        if (!firstErr) firstErr = jsonError(body, e);
      }
    }
    return { error: firstErr };
  }

  /**
   * Every Ω block in `text`, in order:
   * {start, end, body, complete, kind?, call fields…, error?}.
   * `start` is the Ω's index, `end` just past the closing brace (or the
   * text's end when incomplete). An incomplete block (still streaming) has
   * `complete: false` and nothing else is decided about it. A complete one
   * has either `kind` or `error`. An Ω inside an earlier block is part of
   * that block, not a block of its own.
   */
  function findBlocks(text) {
    const out = [];
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (!isOmega(c)) {
        i++;
        continue;
      }
      let j = i + 1;
      while (j < text.length && SPACE.test(text[j])) j++;
      if (text[j] !== "{") {
        i++;
        continue;
      }
      let end = matchBraces(text, j);
      let body = end > 0 ? text.slice(j, end) : null;
      let parsed = body !== null ? parseBody(body) : null;
      if ((body === null || parsed.error) && ENTITY_QUOTE.test(text.slice(j))) {
        // Entity-escaped quotes (`&quot;`) hide strings from the brace
        // matcher: a `}` inside such a string ends the match too early, or
        // the block never seems to close. Match again on the decoded text.
        const d = decodedBlock(text, j);
        if (d) {
          const p = parseBody(d.body);
          if (!p.error || body === null) {
            body = d.body;
            end = d.end;
            parsed = p;
          }
        }
      }
      if (body === null) {
        out.push({ start: i, end: text.length, body: text.slice(j), complete: false });
        break;
      }
      const block = { start: i, end, body, complete: true };
      if (parsed.error) block.error = parsed.error;
      else {
        block.value = parsed.value;
        Object.assign(block, classify(parsed.value));
      }
      out.push(block);
      i = end;
    }
    return out;
  }

  const ENTITY_QUOTE = /&(quot|#34|#x22);/i;

  /**
   * The block that starts at `text[j]` once HTML entities are decoded:
   * {body (decoded), end (index in `text` just past its closing brace)}, or
   * null when it does not close.
   */
  function decodedBlock(text, j) {
    const dec = decodeEntities(text.slice(j));
    const e = matchBraces(dec, 0);
    if (e < 0) return null;
    const body = dec.slice(0, e);
    for (let k = j + 1; k <= text.length; k++) {
      if (text[k - 1] === "}" && decodeEntities(text.slice(j, k)) === body) return { body, end: k };
    }
    return null;
  }

  /** 64-bit FNV-1a of a string's UTF-16 code units, as 16 hex digits. */
  function hash64(s) {
    let h = 0xcbf29ce484222325n;
    const p = 0x100000001b3n;
    const mask = 0xffffffffffffffffn;
    for (let i = 0; i < s.length; i++) {
      h ^= BigInt(s.charCodeAt(i));
      h = (h * p) & mask;
    }
    return h.toString(16).padStart(16, "0");
  }

  /**
   * What a block is, for its key: its JSON re-serialised when it parsed (so
   * whitespace or entity changes of a re-render keep the key), else its raw
   * text with whitespace collapsed.
   */
  function blockContent(block) {
    if (block.value !== undefined) return JSON.stringify(block.value);
    return block.body.replace(/[\s\u00a0]+/g, " ").trim();
  }

  /**
   * The key of a block: the page (origin and path), its content and its
   * position (how many blocks with the same content come before it on the
   * page). Also the callKey sent to the hub, so a repeat never runs twice.
   */
  function blockKey(page, content, occurrence) {
    return `th-${hash64(page + "\u0000" + content)}-${occurrence}`;
  }

  /**
   * The hub message for a classified block, keyed. `context` (the tab,
   * e.g. "tab-17") gives each tab its own instance of the hub's
   * per-context servers: its own browser.
   */
  function hubMessage(block, key, context) {
    let m;
    if (block.kind === "batch") {
      m = { type: "tool_batch", id: key, callKey: key, steps: block.steps, options: block.options || {} };
    } else {
      m = { type: "tool_call", id: key, callKey: key, tool: block.tool, params: block.params || {} };
      if (block.timeout !== undefined) m.timeout = block.timeout;
    }
    if (context) m.context = context;
    return m;
  }

  const api = { findBlocks, blockKey, blockContent, hash64, hubMessage, decodeEntities, classify, matchBraces };
  root.ToolhubBlocks = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
