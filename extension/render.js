// How a block's record looks: the result element after the block in the
// page, and the text that goes back into the chat. Loaded by the content
// script before content.js (sets globalThis.ToolhubRender); resultText is
// pure, so node can require() this file for tests.
//
// A record's state is one of
//   ready      complete, not run: it waits for the person (Run, and Allow
//              for a tool that asks); see content.js for when a block runs
//              by itself
//   running | need_user | success | error
// A result longer than the fold limit is shown folded; into the chat go its
// head, its tail and where the whole result is (record.kept.path, a file in
// the hub's workspace that hub__read_file reads).
(function (root) {
  "use strict";

  const SHOW_MAX = 4000;
  /** Of a folded result, what goes into the chat: this much of its start… */
  const HEAD = 3000;
  /** …and of its end. */
  const TAIL = 1500;

  function text(v) {
    if (v === undefined || v === null) return "";
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }

  function show(v) {
    const s = text(v);
    return s.length > SHOW_MAX ? s.slice(0, SHOW_MAX) + `\n… (${s.length - SHOW_MAX} more characters)` : s;
  }

  function errorText(e) {
    if (!e) return "failed";
    return `${e.errorType || "ERROR"}: ${e.message || ""}${e.suggestion ? "\nSuggestion: " + e.suggestion : ""}`;
  }

  /** A result for the chat: whole, or folded to head + where + tail when
   * longer than `limit` characters. `kept` is {path, chars} or {error}. */
  function forChat(v, kept, limit) {
    const s = text(v);
    const chars = (kept && kept.chars) || s.length;
    if (chars <= limit && !(kept && kept.path)) return s;
    const head = s.slice(0, Math.min(HEAD, limit));
    const tail = s.length > head.length ? s.slice(Math.max(head.length, s.length - Math.min(TAIL, limit))) : "";
    const where = kept && kept.path
      ? `the whole result (${chars} characters) is in the file ${kept.path}: read it with hub__read_file`
      : `the whole result (${chars} characters) could not be saved${kept && kept.error ? ": " + kept.error : ""}`;
    return `${head}\n… [${chars - head.length - tail.length} characters left out; ${where}] …\n${tail}`;
  }

  /** The record as text for the AI. A Ω followed by `{` gets "(text)"
   * after it, so the text, once sent (or quoted back by the AI), is never a
   * block itself: the parser skips spaces, zero-width ones included, after
   * a Ω, but nothing else. */
  function resultText(key, r, limit) {
    const lines = [];
    const what = r.kind === "batch" ? `batch of ${r.totalSteps} steps` : r.tool;
    lines.push(`[toolhub result ${key} · ${what} · ${r.state === "success" ? "success" : "failed"}]`);
    if (r.kind === "batch") {
      const idx = Object.keys(r.steps || {}).map(Number).sort((a, b) => a - b);
      for (const i of idx) {
        const s = r.steps[i];
        const body = s.skipped ? `skipped: ${s.reason || ""}` : s.success ? forChat(s.result, s.kept, limit) : errorText(s.error);
        lines.push(`step ${i + 1}${s.stepId ? " (" + s.stepId + ")" : ""} ${s.tool}: ${body}`);
      }
      if (r.state === "error" && r.error) lines.push(errorText(r.error));
    } else {
      lines.push(r.state === "success" ? forChat(r.result, r.kept, limit) : errorText(r.error));
    }
    return lines.join("\n").replace(/([\u03A9\u2126])([\s\u00a0\u200b\ufeff]*\{)/g, "$1(text)$2");
  }

  // ------------------------------------------------------------ the page

  function node(tag, cls, t) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (t !== undefined) n.textContent = t;
    return n;
  }

  /** A result body: a <pre>, or a folded <details> when it is long. */
  function body(v, kept, limit, cls = "toolhub-body") {
    const s = text(v);
    const chars = (kept && kept.chars) || s.length;
    if (chars <= limit) return node("pre", cls, show(v));
    const d = node("details", "toolhub-fold");
    d.setAttribute("data-chars", String(chars));
    const where = kept && kept.path ? ` · whole result in ${kept.path}` : "";
    d.append(node("summary", "", `${chars} characters, folded${where}`), node("pre", cls, show(v)));
    return d;
  }

  const LABEL = {
    ready: "not run: waiting for you",
    running: "running…",
    success: "done",
    error: "failed",
    need_user: "waiting for approval",
  };

  /** What a `ready` block would do, for the person to read before Run. */
  function callText(r) {
    if (r.kind === "batch") return (r.steps0 || []).map((s, i) => `${i + 1}. ${s.tool} ${JSON.stringify(s.params || {})}`).join("\n");
    return `${r.tool} ${JSON.stringify(r.params || {}, null, 1)}`;
  }

  /**
   * Fill `el` for record `r`. `on.run()` and `on.allow()` are called on a
   * person's click of Run / Allow (never on a script's synthetic click).
   */
  function render(el, r, limit, on) {
    el.setAttribute("data-toolhub-state", r.state);
    el.replaceChildren();
    const what = r.kind === "batch" ? `batch of ${r.totalSteps} steps` : r.kind === "invalid" ? "invalid block" : r.tool || "call";
    const head = node("div", "toolhub-head");
    head.append(node("span", "toolhub-name", "toolhub"), node("span", "toolhub-what", what), node("span", "toolhub-label", LABEL[r.state] || r.state));
    if (r.deduplicated) head.append(node("span", "toolhub-dedup", "(answered from the hub's record)"));
    el.append(head);
    if (r.state === "ready") {
      el.append(node("pre", "toolhub-body toolhub-call", callText(r)));
      if (r.why) el.append(node("div", "toolhub-note", r.why));
      const bar = node("div", "toolhub-actions");
      const run = node("button", "toolhub-run", "Run");
      run.type = "button";
      run.setAttribute("data-toolhub-action", "run");
      run.addEventListener("click", (ev) => ev.isTrusted && on.run());
      bar.append(run);
      if (r.askTools && r.askTools.length) {
        const allow = node("button", "toolhub-allow", `Always allow ${r.askTools.join(", ")} on ${r.site}`);
        allow.type = "button";
        allow.setAttribute("data-toolhub-action", "allow");
        allow.addEventListener("click", (ev) => ev.isTrusted && on.allow());
        bar.append(allow);
      }
      el.append(bar);
      return;
    }
    if (r.kind === "batch") {
      const ol = node("ol", "toolhub-steps");
      const idx = Object.keys(r.steps || {}).map(Number).sort((a, b) => a - b);
      for (const i of idx) {
        const s = r.steps[i];
        const st = s.skipped ? "skipped" : s.success ? "success" : "error";
        const li = node("li", "toolhub-step");
        li.value = i + 1;
        li.setAttribute("data-step-index", String(i));
        li.setAttribute("data-step-state", st);
        const title = `${s.stepId ? s.stepId + " · " : ""}${s.tool} · ${st === "success" ? "✓" : st === "skipped" ? "skipped" : "✗"}`;
        li.append(node("span", "toolhub-step-title", title));
        if (s.skipped) {
          if (s.reason) li.append(node("pre", "toolhub-body", s.reason));
        } else if (s.success) {
          if (text(s.result)) li.append(body(s.result, s.kept, limit));
        } else li.append(node("pre", "toolhub-body", errorText(s.error)));
        ol.append(li);
      }
      el.append(ol);
      if (r.state === "error" && r.error) el.append(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    } else if (r.state === "success") {
      el.append(body(r.result, r.kept, limit));
    } else if (r.state === "error") {
      el.append(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    }
    if (r.state === "need_user" && r.needUser) {
      el.append(node("div", "toolhub-note", `${r.needUser.tool} needs your approval: ${r.needUser.reason || ""}. Approve or deny it in the toolhub popup.`));
    } else if (r.note) {
      el.append(node("div", "toolhub-note", r.note));
    }
  }

  const api = { render, resultText, forChat, text, errorText };
  root.ToolhubRender = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
