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
  //
  // In a chat page the result is drawn inside a CLOSED shadow root of the
  // result element (`shield`), so the page's scripts and styles cannot read
  // the buttons, change what the call shows, relabel Run or click it. The
  // element's light DOM keeps a copy of the text (not rendered: the shadow
  // has no slot for it) for whoever reads the page, and each control is a
  // host of its own closed shadow root, put into the drawn result through a
  // named slot. A click on a control counts only when it is the person's
  // (`isTrusted`), on the control itself (`elementFromPoint` at the click),
  // and the control has been fully visible, uncovered and unfaded for
  // ARM_MS (IntersectionObserver v2's `isVisible`, which Chrome computes
  // from occlusion, opacity, transforms and filters): a page that slides
  // Run under the pointer, fades it out or lays something over it gets no
  // run. A control that may take clicks says so with `data-toolhub-armed`.

  /** A control counts clicks once it has been visible this long. */
  const ARM_MS = 400;

  /** The styles inside the shadow root (the host's box is content.css's). */
  const CSS = `
.toolhub-head { display: flex; gap: 8px; align-items: baseline; flex-wrap: wrap; }
.toolhub-name { font-weight: 600; }
.toolhub-what { font-family: ui-monospace, monospace; }
.toolhub-label { color: #475569; }
.toolhub-dedup { color: #64748b; font-size: 12px; }
.toolhub-body { margin: 6px 0 0; padding: 6px 8px; max-height: 240px; overflow: auto; background: #fff;
  border: 1px solid #e2e8f0; border-radius: 4px; white-space: pre-wrap; word-break: break-word;
  font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; color: #0f172a; }
.toolhub-error { color: #991b1b; }
.toolhub-steps { margin: 6px 0 0; padding-left: 22px; }
.toolhub-step { margin: 4px 0; }
.toolhub-step[data-step-state="error"] .toolhub-step-title { color: #b91c1c; }
.toolhub-step[data-step-state="skipped"] .toolhub-step-title { color: #64748b; }
.toolhub-step-title { font-family: ui-monospace, monospace; font-size: 12px; }
.toolhub-note { margin-top: 6px; color: #92400e; }
.toolhub-actions { display: flex; gap: 8px; margin-top: 6px; flex-wrap: wrap; }
.toolhub-fold summary { cursor: pointer; color: #475569; margin-top: 6px; }
.toolhub-actions button { font: 12px/1.3 system-ui, sans-serif; padding: 4px 10px; border-radius: 4px; cursor: pointer;
  border: 1px solid #7c3aed; background: #fff; color: #5b21b6; }
.toolhub-actions button.toolhub-run { background: #7c3aed; color: #fff; }`;

  /** The style of a control's button, inside its own shadow root. */
  const BUTTON_CSS = `
:host { all: initial; display: inline-block; }
button { font: 12px/1.3 system-ui, sans-serif; padding: 4px 10px; border-radius: 4px; cursor: pointer;
  border: 1px solid #7c3aed; background: #fff; color: #5b21b6; }
button.run { background: #7c3aed; color: #fff; }
.why { font: 12px/1.3 system-ui, sans-serif; color: #b91c1c; }`;

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

  /** The Run and Allow controls a `ready` record has: [{action, label, cls}]. */
  function controlsOf(r) {
    if (r.state !== "ready") return [];
    const out = [{ action: "run", label: "Run", cls: "run" }];
    if (r.askTools && r.askTools.length) out.push({ action: "allow", label: `Always allow ${r.askTools.join(", ")} on ${r.site}`, cls: "allow" });
    return out;
  }

  /**
   * The nodes that show record `r`; `control(c)` gives the node for each
   * control (a button, a slot, or nothing).
   */
  function build(r, limit, control) {
    const out = [];
    const what = r.kind === "batch" ? `batch of ${r.totalSteps} steps` : r.kind === "invalid" ? "invalid block" : r.tool || "call";
    const head = node("div", "toolhub-head");
    head.append(node("span", "toolhub-name", "toolhub"), node("span", "toolhub-what", what), node("span", "toolhub-label", LABEL[r.state] || r.state));
    if (r.deduplicated) head.append(node("span", "toolhub-dedup", "(answered from the hub's record)"));
    out.push(head);
    if (r.state === "ready") {
      out.push(node("pre", "toolhub-body toolhub-call", callText(r)));
      if (r.why) out.push(node("div", "toolhub-note", r.why));
      const bar = node("div", "toolhub-actions");
      for (const c of controlsOf(r)) {
        const n = control(c);
        if (n) bar.append(n);
      }
      out.push(bar);
      return out;
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
      out.push(ol);
      if (r.state === "error" && r.error) out.push(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    } else if (r.state === "success") {
      out.push(body(r.result, r.kept, limit));
    } else if (r.state === "error") {
      out.push(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    }
    if (r.state === "need_user" && r.needUser) {
      out.push(node("div", "toolhub-note", `${r.needUser.tool} needs your approval: ${r.needUser.reason || ""}. Approve or deny it in the toolhub popup.`));
    } else if (r.note) {
      out.push(node("div", "toolhub-note", r.note));
    }
    return out;
  }

  // ---- controls out of the page's reach

  /** Result element → its closed shadow root (kept here: a closed root is
   * not reachable from the element, by the page or by us). */
  const roots = new WeakMap();
  /** Control host → {since: when it became fully visible, or 0}. */
  const seen = new WeakMap();
  let watcher = null;

  function visibility() {
    if (watcher !== null) return watcher;
    try {
      watcher = new IntersectionObserver(
        (entries) => {
          for (const e of entries) {
            const st = seen.get(e.target);
            if (!st) continue;
            const visible = e.isVisible === true && e.intersectionRatio >= 0.99;
            clearTimeout(st.timer);
            st.since = visible ? st.since || performance.now() : 0;
            if (!visible) e.target.removeAttribute("data-toolhub-armed");
            else
              st.timer = setTimeout(() => {
                if (!st.since) return;
                st.why.textContent = "";
                e.target.setAttribute("data-toolhub-armed", "");
              }, ARM_MS);
          }
        },
        { trackVisibility: true, delay: 100, threshold: [0.99, 1] },
      );
    } catch {
      watcher = false; // no IntersectionObserver v2: no click counts
    }
    return watcher;
  }

  /** Does this click on control `host` count? */
  function counts(host, ev) {
    if (!ev.isTrusted) return false;
    const st = seen.get(host);
    if (!st || !st.since || performance.now() - st.since < ARM_MS) return false;
    // A pointer click lands on the control itself; a key press (detail 0)
    // has no point.
    if (ev.detail !== 0) {
      const at = document.elementFromPoint(ev.clientX, ev.clientY);
      if (at !== host) return false;
    }
    return true;
  }

  /** A control: a host element (found by `data-toolhub-action`) with a
   * closed shadow root that holds the button. */
  function controlHost(c, fire) {
    const host = node("span", "toolhub-control");
    host.setAttribute("data-toolhub-action", c.action);
    // What it says, for a reader (the drawn label is in the closed root).
    host.setAttribute("data-toolhub-label", c.label);
    host.slot = c.action;
    const root = host.attachShadow({ mode: "closed" });
    const style = node("style", "", BUTTON_CSS);
    const b = node("button", c.cls, c.label);
    b.type = "button";
    const why = node("span", "why");
    b.addEventListener("click", (ev) => {
      ev.stopPropagation();
      if (counts(host, ev)) fire();
      // A person's click the page had covered or faded: say so, and where
      // it can be run instead.
      else if (ev.isTrusted) why.textContent = " not run: this page covers or fades the button; run it from the toolhub side panel";
    });
    root.append(style, b, why);
    seen.set(host, { since: 0, timer: null, why });
    const w = visibility();
    if (w) w.observe(host);
    return host;
  }

  function unwatch(el) {
    const w = watcher;
    if (!w) return;
    for (const h of el.querySelectorAll(":scope > .toolhub-control")) w.unobserve(h);
  }

  function shadowOf(el) {
    let root = roots.get(el);
    if (!root) {
      root = el.attachShadow({ mode: "closed" });
      roots.set(el, root);
    }
    return root;
  }

  /**
   * Fill `el` for record `r`. `on.run()` and `on.allow()` are called on a
   * person's click of Run / Allow (never on a script's synthetic click).
   * With `shield` (a web page) it is drawn in a closed shadow root, as
   * above; without (the extension's own panel) straight into `el`.
   */
  function render(el, r, limit, on, shield = false) {
    el.setAttribute("data-toolhub-state", r.state);
    if (!shield) {
      // The extension's own page: its styles once, into the document.
      if (!document.getElementById("toolhub-render-css")) {
        const st = node("style", "", CSS);
        st.id = "toolhub-render-css";
        document.head.append(st);
      }
      el.replaceChildren(
        ...build(r, limit, (c) => {
          const b = node("button", `toolhub-${c.cls}`, c.label);
          b.type = "button";
          b.setAttribute("data-toolhub-action", c.action);
          b.addEventListener("click", (ev) => ev.isTrusted && on[c.action]());
          return b;
        }),
      );
      return;
    }
    const root = shadowOf(el);
    const style = node("style", "", CSS);
    root.replaceChildren(
      style,
      ...build(r, limit, (c) => {
        const slot = document.createElement("slot");
        slot.name = c.action;
        return slot;
      }),
    );
    unwatch(el);
    // The light DOM: the text, not drawn (no slot takes it), and the
    // controls, drawn through their slots.
    el.replaceChildren(...build(r, limit, () => null), ...controlsOf(r).map((c) => controlHost(c, () => on[c.action]())));
  }
  const api = { render, resultText, forChat, text, errorText };
  root.ToolhubRender = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
