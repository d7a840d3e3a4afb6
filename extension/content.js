// toolhub extension: the content script. It finds Ω{…} blocks in the chat
// page, waits until each is complete and has stopped changing, asks the
// service worker to run it once, and shows the result in an element right
// after the element that holds the block:
//   <div data-toolhub-call="KEY" data-toolhub-state="running|success|error|need_user">
// A block's KEY is its page, content and position (blocks.js), so a
// re-render, a scroll or a reload finds the same key and the stored result
// instead of running the block again.
(() => {
  "use strict";
  if (window.__toolhubContent) return;
  window.__toolhubContent = true;

  const B = globalThis.ToolhubBlocks;
  /** A complete block runs once its content has not changed for this long. */
  const STABLE_MS = 800;
  const SCAN_DEBOUNCE_MS = 100;
  const POLL_MS = 2000;
  const SHOW_MAX = 4000;

  const settings = { insertResult: false, autoSubmit: false };
  chrome.storage.onChanged.addListener((ch, area) => {
    if (area !== "local") return;
    for (const k of ["insertResult", "autoSubmit"]) if (k in ch) settings[k] = !!ch[k].newValue;
  });

  /** key → {key, holder, block, content, since, requested, record, el, sig, startedHere, inserted} */
  const known = new Map();

  const SKIP_TAGS = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEXTAREA", "INPUT", "SELECT", "TEMPLATE"]);
  const BLOCKISH = "pre, p, li, blockquote, td, th, h1, h2, h3, h4, h5, h6, div, article, section, main";

  function isOmega(c) {
    return c === "\u03A9" || c === "\u2126";
  }

  function excluded(el) {
    for (let e = el; e && e !== document.body; e = e.parentElement) {
      if (SKIP_TAGS.has(e.tagName) || e.hasAttribute("data-toolhub-call") || e.isContentEditable) return true;
    }
    return false;
  }

  /** The text of `root` as the parser sees it (our result elements, scripts
   * and input boxes left out), and where each Ω is in it. */
  function textOf(root) {
    const parts = [];
    const omegas = [];
    let offset = 0;
    const w = document.createTreeWalker(root, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
      acceptNode(n) {
        if (n.nodeType === Node.ELEMENT_NODE) {
          return SKIP_TAGS.has(n.tagName) || n.hasAttribute("data-toolhub-call") || n.isContentEditable
            ? NodeFilter.FILTER_REJECT
            : NodeFilter.FILTER_SKIP;
        }
        return NodeFilter.FILTER_ACCEPT;
      },
    });
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const d = n.data;
      for (let i = 0; i < d.length; i++) if (isOmega(d[i])) omegas.push({ node: n, idx: i, offset: offset + i });
      parts.push(d);
      offset += d.length;
    }
    return { text: parts.join(""), omegas };
  }

  /** Every Ω in the page, in document order, as {node, idx}. */
  function pageOmegas() {
    const out = [];
    const w = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const d = n.data;
      if (!d.includes("\u03A9") && !d.includes("\u2126")) continue;
      if (!n.parentElement || excluded(n.parentElement)) continue;
      for (let i = 0; i < d.length; i++) if (isOmega(d[i])) out.push({ node: n, idx: i });
    }
    return out;
  }

  /**
   * Complete blocks in the page, in document order: {holder, block}. The
   * holder is the smallest block-level element (up to six levels above the
   * Ω) whose text holds the whole block, so a block spread over several
   * paragraphs or highlighted spans is found whole.
   */
  function scanBlocks() {
    const handled = new Map(); // node → Set(idx)
    const isHandled = (o) => handled.has(o.node) && handled.get(o.node).has(o.idx);
    const mark = (o) => {
      if (!handled.has(o.node)) handled.set(o.node, new Set());
      handled.get(o.node).add(o.idx);
    };
    const found = [];
    for (const om of pageOmegas()) {
      if (isHandled(om)) continue;
      let h = om.node.parentElement.closest(BLOCKISH) || om.node.parentElement;
      let chosen = null;
      for (let level = 0; h && level < 6; level++, h = h.parentElement) {
        const t = textOf(h);
        const at = t.omegas.find((o) => o.node === om.node && o.idx === om.idx);
        if (!at) break;
        const blocks = B.findBlocks(t.text);
        const b = blocks.find((x) => x.start <= at.offset && at.offset < Math.max(x.end, x.start + 1));
        if (!b) break; // an Ω that starts no block
        if (b.complete) {
          chosen = { holder: h, t, blocks };
          break;
        }
        if (h === document.body) break;
      }
      mark(om);
      if (!chosen) continue;
      for (const b of chosen.blocks) {
        if (!b.complete) continue;
        const inside = chosen.t.omegas.filter((o) => o.offset >= b.start && o.offset < b.end);
        const first = inside[0];
        const fresh = first && !isHandled(first);
        if (!fresh && first !== undefined && !(first.node === om.node && first.idx === om.idx)) continue;
        inside.forEach(mark);
        found.push({ holder: chosen.holder, block: b });
      }
    }
    return found;
  }

  /** The page part of a block's key: origin, path and query (some chat
   * sites name the conversation in the query, e.g. `?id=`). */
  function pageId() {
    return location.origin + location.pathname + location.search;
  }

  let scanTimer = null;
  let rescanAt = 0;

  function scheduleScan(delay = SCAN_DEBOUNCE_MS) {
    const at = Date.now() + delay;
    if (scanTimer && rescanAt <= at) return;
    clearTimeout(scanTimer);
    rescanAt = at;
    scanTimer = setTimeout(() => {
      scanTimer = null;
      scan();
    }, delay);
  }

  function scan() {
    const now = Date.now();
    const seen = new Map(); // content → count
    let waitFor = Infinity;
    const byHolder = new Map();
    for (const { holder, block } of scanBlocks()) {
      const content = B.blockContent(block);
      const n = seen.get(content) || 0;
      seen.set(content, n + 1);
      const key = B.blockKey(pageId(), content, n);
      let k = known.get(key);
      if (!k) {
        k = { key, content, since: now, requested: false, record: null, el: null, sig: null };
        known.set(key, k);
      }
      k.holder = holder;
      k.block = block;
      if (!byHolder.has(holder)) byHolder.set(holder, []);
      byHolder.get(holder).push(k);
      if (block.error) {
        k.record = {
          key,
          state: "error",
          kind: "invalid",
          error: {
            errorType: "INVALID_BLOCK",
            message: block.error,
            suggestion: 'write the block as strict JSON: Ω{"tool":"NAME","params":{…}} or Ω{"steps":[…],"options":{…}}',
          },
        };
        continue;
      }
      if (!k.requested) {
        const left = k.since + STABLE_MS - now;
        if (left > 0) {
          waitFor = Math.min(waitFor, left);
          continue;
        }
        request(k);
      }
    }
    // Result elements, in block order, right after each holder.
    for (const [holder, ks] of byHolder) {
      let prev = holder;
      for (const k of ks) {
        if (!k.record) continue;
        const el = elementFor(k);
        if (prev.nextElementSibling !== el) prev.after(el);
        render(k);
        prev = el;
      }
    }
    if (waitFor < Infinity) scheduleScan(waitFor + 10);
  }

  function blockForHub(b) {
    if (b.kind === "batch") return { kind: "batch", steps: b.steps, options: b.options };
    const c = { kind: "call", tool: b.tool, params: b.params };
    if (b.timeout !== undefined) c.timeout = b.timeout;
    return c;
  }

  function request(k) {
    k.requested = true;
    k.record = { key: k.key, state: "running", kind: k.block.kind, tool: k.block.tool, totalSteps: k.block.steps ? k.block.steps.length : 1, steps: {} };
    chrome.runtime
      .sendMessage({ type: "run", key: k.key, block: blockForHub(k.block), page: pageId(), title: document.title })
      .then((resp) => {
        if (!resp || resp.error || !resp.record) {
          k.record = {
            key: k.key,
            state: "error",
            error: { errorType: "UNKNOWN", message: `the extension could not run this block: ${(resp && resp.error) || "no answer"}`, suggestion: "reload the page" },
          };
        } else {
          if (resp.record.state === "running" || resp.record.state === "need_user") k.startedHere = true;
          apply(k, resp.record);
          return;
        }
        scheduleScan(0);
      })
      .catch(() => {
        // The extension was reloaded or the worker is starting: try again.
        k.requested = false;
        k.since = 0;
        scheduleScan(500);
      });
    ensurePolling();
  }

  function apply(k, record) {
    k.record = record;
    if (k.holder && k.holder.isConnected) {
      const el = elementFor(k);
      if (!el.isConnected) k.holder.after(el);
      render(k);
    }
    if ((record.state === "success" || record.state === "error") && k.startedHere && !k.inserted) {
      k.inserted = true;
      if (settings.insertResult) insertIntoChat(k);
    }
  }

  function elementFor(k) {
    if (k.el && k.el.isConnected) return k.el;
    let el = null;
    for (const e of document.querySelectorAll("[data-toolhub-call]")) if (e.getAttribute("data-toolhub-call") === k.key) el = e;
    if (!el) {
      el = document.createElement("div");
      el.className = "toolhub-result";
      el.setAttribute("data-toolhub-call", k.key);
    }
    k.el = el;
    k.sig = null;
    return el;
  }

  function show(v) {
    if (v === undefined || v === null) return "";
    const s = typeof v === "string" ? v : JSON.stringify(v, null, 2);
    return s.length > SHOW_MAX ? s.slice(0, SHOW_MAX) + `\n… (${s.length - SHOW_MAX} more characters)` : s;
  }

  function errorText(e) {
    if (!e) return "failed";
    return `${e.errorType || "ERROR"}: ${e.message || ""}${e.suggestion ? "\nSuggestion: " + e.suggestion : ""}`;
  }

  function node(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== undefined) n.textContent = text;
    return n;
  }

  const LABEL = { running: "running…", success: "done", error: "failed", need_user: "waiting for approval" };

  function render(k) {
    const r = k.record;
    if (!r || !k.el) return;
    const sig = JSON.stringify(r);
    if (k.sig === sig && k.el.getAttribute("data-toolhub-state") === r.state) return;
    k.sig = sig;
    const el = k.el;
    el.setAttribute("data-toolhub-state", r.state);
    el.replaceChildren();
    const what = r.kind === "batch" ? `batch of ${r.totalSteps} steps` : r.kind === "invalid" ? "invalid block" : r.tool || "call";
    const head = node("div", "toolhub-head");
    head.append(node("span", "toolhub-name", "toolhub"), node("span", "toolhub-what", what), node("span", "toolhub-label", LABEL[r.state] || r.state));
    if (r.deduplicated) head.append(node("span", "toolhub-dedup", "(answered from the hub's record)"));
    el.append(head);
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
        const body = s.skipped ? s.reason || "" : s.success ? show(s.result) : errorText(s.error);
        if (body) li.append(node("pre", "toolhub-body", body));
        ol.append(li);
      }
      el.append(ol);
      if (r.state === "error" && r.error) el.append(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    } else if (r.state === "success") {
      el.append(node("pre", "toolhub-body", show(r.result)));
    } else if (r.state === "error") {
      el.append(node("pre", "toolhub-body toolhub-error", errorText(r.error)));
    }
    if (r.state === "need_user" && r.needUser) {
      el.append(node("div", "toolhub-note", `${r.needUser.tool} needs your approval: ${r.needUser.reason || ""}. Approve or deny it in the toolhub popup.`));
    } else if (r.note) {
      el.append(node("div", "toolhub-note", r.note));
    }
  }

  // ------------------------------------------------------------ results into the chat

  function visible(el) {
    return el.getClientRects().length > 0 && !excludedResult(el);
  }

  function excludedResult(el) {
    return !!el.closest("[data-toolhub-call]");
  }

  function chatInput() {
    const sels = [
      "#prompt-textarea",
      'div.ProseMirror[contenteditable="true"]',
      'rich-textarea [contenteditable="true"]',
      "textarea",
      '[contenteditable="true"][role="textbox"]',
      '[contenteditable="true"]',
    ];
    for (const s of sels) {
      const all = [...document.querySelectorAll(s)].filter(visible);
      if (all.length) return all[all.length - 1];
    }
    return null;
  }

  /** The result as text for the AI. A Ω followed by `{` is broken with a
   * zero-width space so the result, once sent, is never a block itself. */
  function resultText(k) {
    const r = k.record;
    const lines = [];
    const what = r.kind === "batch" ? `batch of ${r.totalSteps} steps` : r.tool;
    lines.push(`[toolhub result ${k.key} · ${what} · ${r.state === "success" ? "success" : "failed"}]`);
    if (r.kind === "batch") {
      const idx = Object.keys(r.steps || {}).map(Number).sort((a, b) => a - b);
      for (const i of idx) {
        const s = r.steps[i];
        const body = s.skipped ? `skipped: ${s.reason || ""}` : s.success ? show(s.result) : errorText(s.error);
        lines.push(`step ${i + 1}${s.stepId ? " (" + s.stepId + ")" : ""} ${s.tool}: ${body}`);
      }
      if (r.state === "error" && r.error) lines.push(errorText(r.error));
    } else {
      lines.push(r.state === "success" ? show(r.result) : errorText(r.error));
    }
    return lines.join("\n").replace(/([\u03A9\u2126])(\s*\{)/g, "$1\u200b$2");
  }

  function insertIntoChat(k) {
    const input = chatInput();
    if (!input) return;
    const text = resultText(k);
    input.focus();
    if (input instanceof HTMLTextAreaElement || input instanceof HTMLInputElement) {
      const proto = Object.getPrototypeOf(input);
      const setter = Object.getOwnPropertyDescriptor(proto, "value").set;
      setter.call(input, input.value ? input.value + "\n\n" + text : text);
      input.dispatchEvent(new Event("input", { bubbles: true }));
    } else {
      const sel = window.getSelection();
      sel.selectAllChildren(input);
      sel.collapseToEnd();
      if (!document.execCommand("insertText", false, (input.textContent ? "\n\n" : "") + text)) {
        input.textContent += text;
        input.dispatchEvent(new InputEvent("input", { bubbles: true }));
      }
    }
    if (!settings.autoSubmit) return;
    // Submit once no other block this page started is still running.
    const busy = [...known.values()].some((x) => x.startedHere && x.record && (x.record.state === "running" || x.record.state === "need_user"));
    if (busy) return;
    setTimeout(() => submit(input), 50);
  }

  function submit(input) {
    const scope = input.closest("form") || document;
    const btn = scope.querySelector(
      'button[data-testid="send-button"], button[aria-label*="Send" i], button[aria-label*="发送"], button[type="submit"]',
    );
    if (btn && !btn.disabled) {
      btn.click();
      return;
    }
    const form = input.closest("form");
    if (form) form.requestSubmit();
    else input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", keyCode: 13, bubbles: true }));
  }

  // ------------------------------------------------------------ updates

  chrome.runtime.onMessage.addListener((msg) => {
    if (!msg || msg.type !== "toolhub-update" || !msg.record) return;
    const k = known.get(msg.record.key);
    if (k) apply(k, msg.record); // only blocks of this page
  });

  let pollTimer = null;

  /** While a block of this page runs, ask the worker for it every 2 s: an
   * update lost while the worker restarted is picked up, and the question
   * wakes a stopped worker so it resumes its hub session. */
  function ensurePolling() {
    if (pollTimer) return;
    pollTimer = setInterval(() => {
      const keys = [...known.values()].filter((k) => k.requested && k.record && (k.record.state === "running" || k.record.state === "need_user")).map((k) => k.key);
      if (!keys.length) {
        clearInterval(pollTimer);
        pollTimer = null;
        return;
      }
      chrome.runtime
        .sendMessage({ type: "status", keys })
        .then((resp) => {
          for (const r of (resp && resp.records) || []) {
            const k = known.get(r.key);
            if (k) apply(k, r);
          }
        })
        .catch(() => {});
    }, POLL_MS);
  }

  const observer = new MutationObserver((muts) => {
    for (const m of muts) {
      const t = m.target.nodeType === Node.ELEMENT_NODE ? m.target : m.target.parentElement;
      if (t && t.closest && t.closest("[data-toolhub-call]")) continue;
      scheduleScan();
      return;
    }
  });

  // Start, unless this page is the hub's own (its dashboard shows params
  // and results, which may hold blocks that must not run).
  chrome.storage.local
    .get(["insertResult", "autoSubmit", "hubUrl"])
    .then((s) => {
      settings.insertResult = !!s.insertResult;
      settings.autoSubmit = !!s.autoSubmit;
      const hub = (s.hubUrl || "ws://127.0.0.1:8765/ws").replace(/^ws(s?):\/\//, "http$1://").replace(/\/ws\/?$/, "");
      let hubOrigin = null;
      try {
        hubOrigin = new URL(hub).origin;
      } catch {}
      if (location.origin === hubOrigin) return;
      observer.observe(document.documentElement, { childList: true, subtree: true, characterData: true });
      scheduleScan(0);
    })
    .catch(() => {});
})();
