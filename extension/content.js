// toolhub extension: the content script. It reads Ω{…} blocks out of the
// assistant's messages of a chat page (the site adapter, sites.js and
// sites/<site>.js, says which elements those are), and shows each block's
// result in an element right after the element that holds the block:
//   <div data-toolhub-call="KEY" data-toolhub-state="ready|running|success|error|need_user">
//
// What runs by itself: a complete block, stable for STABLE_MS, in an
// assistant message of a LIVE turn (first seen while the site marked it as
// streaming, or appeared after the person sent a message from this tab),
// on a page that is not a share view, outside quoted text, whose tools the
// site's policy lets run without asking (policy.js). Everything else, once
// complete, is `ready`: the call is shown with a Run button (and "always
// allow" for a tool that asks); only a person's click runs it. History (what
// was on the page when it loaded, a conversation reached by in-app
// navigation, a reload) never runs by itself. Blocks outside assistant
// messages (user messages, the composer) are never read.
//
// A block's KEY is its page, content and position (blocks.js), so a
// re-render, a scroll or a reload finds the same key and the stored result
// instead of running the block again.
(() => {
  "use strict";
  if (window.__toolhubContent) return;
  window.__toolhubContent = true;

  const B = globalThis.ToolhubBlocks;
  const { blocksIn } = globalThis.ToolhubScan;
  const S = globalThis.ToolhubSites;
  const R = globalThis.ToolhubRender;
  /** A complete block runs once its content has not changed for this long. */
  const STABLE_MS = 800;
  const SCAN_DEBOUNCE_MS = 100;
  const POLL_MS = 2000;
  /** A conversation the page moved to this soon after a send (a new chat
   * getting its URL) keeps the turn live. */
  const SEND_CARRIES_MS = 120000;
  const LOCAL = /^https?:\/\/(127\.0\.0\.1|localhost)(:\d+)?$/;

  const settings = { insertResult: false, autoSubmit: false, foldChars: 20000, hubUrl: null, localOrigins: [], sitesOff: [] };
  /** The adapter in force on this page, or null while the extension is off here. */
  let site = null;

  /** key → {key, holder, msg, block, content, since, checked, requested, record, el, sig, live, quoted, startedHere, inserted} */
  const known = new Map();

  /** The page part of a block's key: origin, path and query (some chat
   * sites name the conversation in the query, e.g. `?id=`). */
  function pageId() {
    return location.origin + location.pathname + location.search;
  }

  // ------------------------------------------------------------ live turns

  /** The conversation in view and what is known of its messages:
   * message id → live (true) or history (false). */
  const conv = { id: null, live: new Map(), historyKeys: null };
  /** The person's last send from this tab: {at, count, conv}. */
  let sent = null;

  function conversationKey() {
    return site.conversation ? site.conversation(location) : pageId();
  }

  function messages() {
    return site.generic ? [document.body] : [...document.querySelectorAll(site.assistant)];
  }

  function messageId(m, i) {
    return (site.messageId && site.messageId(m, i)) || m.getAttribute("data-message-id") || `#${i}`;
  }

  function streaming(m) {
    try {
      return !!site.streaming(m, document);
    } catch {
      return false;
    }
  }

  function isShare() {
    try {
      return !!site.isShare(new URL(location.href));
    } catch {
      return true;
    }
  }

  /** Everything on the page now is history, except (right after a send from
   * this tab, as when a new chat gets its URL) a message still streaming. */
  function enterConversation() {
    const carry = sent && Date.now() - sent.at < SEND_CARRIES_MS;
    conv.id = conversationKey();
    conv.live = new Map();
    conv.historyKeys = null;
    messages().forEach((m, i) => conv.live.set(messageId(m, i), !!carry && !site.generic && streaming(m)));
    sent = carry ? { ...sent, conv: conv.id } : null;
  }

  /** Is message `m` (the `i`th assistant message) part of a live turn? */
  function liveMessage(m, i) {
    const id = messageId(m, i);
    if (!conv.live.has(id)) {
      const afterSend = sent && sent.conv === conv.id && i >= sent.count;
      conv.live.set(id, !isShare() && (streaming(m) || !!afterSend));
    }
    return conv.live.get(id);
  }

  function noteSent() {
    if (!site) return;
    sent = { at: Date.now(), count: site.generic ? 0 : messages().length, conv: conv.id };
  }

  // ------------------------------------------------------------ scanning

  let scanTimer = null;
  let rescanAt = 0;

  function scheduleScan(delay = SCAN_DEBOUNCE_MS) {
    if (!site) return;
    const at = Date.now() + delay;
    if (scanTimer && rescanAt <= at) return;
    clearTimeout(scanTimer);
    rescanAt = at;
    scanTimer = setTimeout(() => {
      scanTimer = null;
      scan();
    }, delay);
  }

  function quotedIn(holder, msg) {
    const sel = site.quoted || "blockquote";
    const q = holder.closest(sel);
    return !!q && msg.contains(q) && q !== msg;
  }

  function scan() {
    if (!site) return;
    if (conversationKey() !== conv.id) enterConversation();
    const now = Date.now();
    const seen = new Map(); // content → count
    let waitFor = Infinity;
    const byHolder = new Map();
    const firstScan = site.generic && conv.historyKeys === null;
    if (firstScan) conv.historyKeys = new Set();
    messages().forEach((msg, i) => {
      const msgLive = site.generic ? true : liveMessage(msg, i);
      for (const { holder, block } of blocksIn(msg)) {
        const content = B.blockContent(block);
        const n = seen.get(content) || 0;
        seen.set(content, n + 1);
        const key = B.blockKey(pageId(), content, n);
        if (firstScan) conv.historyKeys.add(key);
        let k = known.get(key);
        if (!k) {
          k = { key, content, since: now, seenAt: now, checked: false, requested: false, record: null, el: null, sig: null };
          known.set(key, k);
        }
        k.holder = holder;
        k.msg = msg;
        k.block = block;
        // Live once, live for good (a re-render does not make it history);
        // never live on a share view or in quoted text.
        const liveNow = site.generic ? !conv.historyKeys.has(key) : msgLive;
        k.live = (k.live || liveNow) && !isShare();
        k.quoted = quotedIn(holder, msg);
        if (!byHolder.has(holder)) byHolder.set(holder, []);
        byHolder.get(holder).push(k);
        if (block.error) {
          k.record = invalidRecord(key, block.error);
          continue;
        }
        if (!k.checked) {
          const left = k.since + STABLE_MS - now;
          if (left > 0) {
            waitFor = Math.min(waitFor, left);
            continue;
          }
          check(k);
        }
      }
    });
    // Result elements, in block order, right after each holder.
    for (const [holder, ks] of byHolder) {
      let prev = holder;
      for (const k of ks) {
        if (!k.record) continue;
        const el = elementFor(k);
        if (prev.nextElementSibling !== el) prev.after(el);
        paint(k);
        prev = el;
      }
    }
    if (waitFor < Infinity) scheduleScan(waitFor + 10);
  }

  function invalidRecord(key, message) {
    return {
      key,
      state: "error",
      kind: "invalid",
      error: {
        errorType: "INVALID_BLOCK",
        message,
        suggestion: 'write the block as strict JSON: the Ω sign, then {"tool":"NAME","params":{…}} or {"steps":[…],"options":{…}}',
      },
    };
  }

  function blockForHub(b) {
    if (b.kind === "batch") return { kind: "batch", steps: b.steps, options: b.options };
    const c = { kind: "call", tool: b.tool, params: b.params };
    if (b.timeout !== undefined) c.timeout = b.timeout;
    return c;
  }

  function siteLabel() {
    return location.host;
  }

  /** Why a block waits for a click, in words. */
  function whyWaiting(k, policy) {
    const allow = policy.allow || [];
    const held = policy.tools.filter((t) => t.policy === "ask" && !allow.includes(t.qualifiedName)).map((t) => `${t.qualifiedName}${t.why ? " (" + t.why + ")" : ""}`);
    if (isShare()) return "This is a shared conversation: its blocks run only when you click Run.";
    if (!k.live) return "This block was already on the page (history, a reload or another conversation): it runs only when you click Run.";
    if (k.quoted) return "This block is inside quoted text: it runs only when you click Run.";
    const parts = [];
    if (allow.length) parts.push(`${allow.join(", ")} may change things on your computer or show what other sessions did: it runs when you click Run, or by itself once you always allow it on ${siteLabel()}.`);
    if (held.length) parts.push(`${held.join(", ")}: runs only when you click Run.`);
    return parts.length ? parts.join(" ") : "It runs when you click Run.";
  }

  function readyRecord(k, policy) {
    const b = k.block;
    return {
      key: k.key,
      state: "ready",
      kind: b.kind,
      tool: b.tool,
      params: b.params,
      steps0: b.kind === "batch" ? b.steps.map((s) => ({ tool: s.tool, params: s.params })) : undefined,
      totalSteps: b.steps ? b.steps.length : 1,
      // "Always allow" names only tools it may remember: never a meta-tool.
      askTools: policy.allow || [],
      site: siteLabel(),
      why: whyWaiting(k, policy),
    };
  }

  function refusedRecord(k, policy) {
    const never = policy.tools.filter((t) => t.policy === "never").map((t) => t.qualifiedName);
    return {
      key: k.key,
      state: "error",
      kind: k.block.kind,
      tool: k.block.tool,
      totalSteps: k.block.steps ? k.block.steps.length : 1,
      steps: {},
      errorFromPolicy: true,
      error: {
        errorType: "SAFETY_BLOCKED",
        message: `${never.join(", ")} is set to never run on ${siteLabel()}; nothing ran`,
        suggestion: "change the tool's policy for this site in the toolhub popup if you want it to run",
      },
    };
  }

  /** Ask the worker what this block is: already run (its record), or how
   * the site's policy treats its tools; then run it, or show it ready. */
  function check(k) {
    k.checked = true;
    chrome.runtime
      .sendMessage({ type: "check", key: k.key, block: blockForHub(k.block) })
      .then((resp) => {
        if (!resp || resp.error) throw new Error((resp && resp.error) || "no answer");
        if (resp.record) return apply(k, resp.record);
        if (resp.off) {
          stop();
          return;
        }
        decide(k, resp.policy);
      })
      .catch(() => {
        // The extension was reloaded or the worker is starting: ask again.
        k.checked = false;
        k.since = 0;
        scheduleScan(500);
      });
  }

  function decide(k, policy) {
    if (policy.policy === "never") {
      k.record = refusedRecord(k, policy);
    } else if (k.live && !k.quoted && !isShare() && policy.policy === "auto") {
      request(k, "auto");
      return;
    } else {
      k.record = readyRecord(k, policy);
    }
    scheduleScan(0);
  }

  /** Run a block: `mode` is "auto" (a live turn, tools that run without
   * asking), "click" (the person pressed Run) or "allow" (pressed "always
   * allow": the worker remembers the choice for this site, then runs). */
  function request(k, mode) {
    k.requested = true;
    k.record = { key: k.key, state: "running", kind: k.block.kind, tool: k.block.tool, totalSteps: k.block.steps ? k.block.steps.length : 1, steps: {} };
    chrome.runtime
      .sendMessage({ type: "run", mode, key: k.key, block: blockForHub(k.block), page: pageId(), title: document.title })
      .then((resp) => {
        if (resp && resp.policy) {
          // The policy changed since the check: it waits for the person.
          k.requested = false;
          decide(k, resp.policy);
          return;
        }
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
        // The extension was reloaded or the worker is starting: ask again.
        k.requested = false;
        k.checked = false;
        k.record = null;
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
      paint(k);
    }
    if ((record.state === "success" || record.state === "error") && k.startedHere && !k.inserted) {
      k.inserted = true;
      if (settings.insertResult) insertIntoChat(k);
    }
  }

  /** The result elements this script made (a page's element with the
   * same attribute is never drawn into: it could hold the page's own
   * shadow root or listeners). */
  const mine = new WeakSet();

  function elementFor(k) {
    if (k.el && k.el.isConnected) return k.el;
    for (const e of document.querySelectorAll("[data-toolhub-call]")) if (e.getAttribute("data-toolhub-call") === k.key && e !== k.el && !mine.has(e)) e.remove();
    let el = k.el;
    if (!el) {
      el = document.createElement("div");
      el.className = "toolhub-result";
      el.setAttribute("data-toolhub-call", k.key);
      mine.add(el);
    }
    k.el = el;
    k.sig = null;
    return el;
  }

  function paint(k) {
    const r = k.record;
    if (!r || !k.el) return;
    const sig = JSON.stringify(r);
    if (k.sig === sig && k.el.getAttribute("data-toolhub-state") === r.state) return;
    k.sig = sig;
    notifyPanel();
    // Drawn in a closed shadow root: the page cannot reach or cover Run.
    const on = { run: () => !k.requested && request(k, "click"), allow: () => !k.requested && request(k, "allow") };
    R.render(k.el, r, settings.foldChars, on, true);
  }

  // ------------------------------------------------------------ results into the chat

  function visible(el) {
    return el.getClientRects().length > 0 && !el.closest("[data-toolhub-call]");
  }

  /** The site's real editor (the adapter's composer), the last visible one. */
  function chatInput() {
    const all = [...document.querySelectorAll(site.composer)].filter(visible);
    return all.length ? all[all.length - 1] : null;
  }

  /** Put `text` at the end of the composer, through the editor's own input
   * handling (ProseMirror and Quill read `insertText` input events). */
  function putText(input, text) {
    input.focus();
    if (input instanceof HTMLTextAreaElement || input instanceof HTMLInputElement) {
      const proto = Object.getPrototypeOf(input);
      const setter = Object.getOwnPropertyDescriptor(proto, "value").set;
      setter.call(input, input.value ? input.value + "\n\n" + text : text);
      input.dispatchEvent(new Event("input", { bubbles: true }));
      return;
    }
    const sel = window.getSelection();
    sel.selectAllChildren(input);
    sel.collapseToEnd();
    const before = input.textContent.trim() ? "\n\n" : "";
    if (!document.execCommand("insertText", false, before + text)) {
      input.textContent += before + text;
      input.dispatchEvent(new InputEvent("input", { bubbles: true }));
    }
  }

  function insertIntoChat(k) {
    const input = chatInput();
    if (!input) return;
    putText(input, R.resultText(k.key, k.record, settings.foldChars));
    if (!settings.autoSubmit) return;
    // Submit once no other block this page started is still running.
    const busy = [...known.values()].some((x) => x.startedHere && x.record && (x.record.state === "running" || x.record.state === "need_user"));
    if (busy) return;
    waitForSend(input, Date.now() + 5000);
  }

  /** Press the site's send button once the editor has enabled it. */
  function waitForSend(input, until) {
    const btn = [...document.querySelectorAll(site.send)].filter(visible).pop();
    if (btn && !btn.disabled && btn.getAttribute("aria-disabled") !== "true") {
      noteSent();
      btn.click();
      return;
    }
    if (Date.now() < until) {
      setTimeout(() => waitForSend(input, until), 50);
      return;
    }
    noteSent();
    const form = input.closest("form");
    if (form) form.requestSubmit();
    else input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", code: "Enter", keyCode: 13, bubbles: true }));
  }

  // ------------------------------------------------------------ updates

  chrome.runtime.onMessage.addListener((msg, sender, reply) => {
    if (!msg) return;
    if (msg.type === "toolhub-update" && msg.record) {
      const k = known.get(msg.record.key);
      if (k) apply(k, msg.record); // only blocks of this page
      return;
    }
    // The side panel (an extension page, never a web page: those cannot
    // message a content script) asks for this tab's blocks, runs one the
    // person pressed Run for, or puts the instructions into the composer.
    if (sender.tab || sender.id !== chrome.runtime.id) return;
    if (msg.type === "panel-blocks") {
      reply(panelState());
    } else if (msg.type === "panel-run") {
      const k = known.get(msg.key);
      const ok = !!(site && k && !k.requested && k.record && k.record.state === "ready");
      if (ok) request(k, "click");
      reply({ ok });
    } else if (msg.type === "panel-insert") {
      const input = site && chatInput();
      if (input) putText(input, String(msg.text || ""));
      reply({ ok: !!input });
    }
  });

  /** This tab's blocks for the side panel, newest first. */
  function panelState() {
    const blocks = [...known.values()]
      .filter((k) => k.record)
      .map((k) => ({ key: k.key, seenAt: k.seenAt, live: !!k.live, record: k.record }))
      .reverse();
    return { origin: location.origin, on: !!site, site: site ? site.name : null, title: document.title, blocks };
  }

  let panelNote = null;
  /** Tell an open side panel that this tab's blocks changed (at most every 200 ms). */
  function notifyPanel() {
    if (panelNote) return;
    panelNote = setTimeout(() => {
      panelNote = null;
      chrome.runtime.sendMessage({ type: "toolhub-changed", blocks: true }).catch(() => {});
    }, 200);
  }

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

  // A person sending a message from this tab: the next assistant messages
  // are a live turn. Only real input counts (a page script's synthetic
  // click or key is not trusted).
  document.addEventListener(
    "click",
    (ev) => {
      if (site && ev.isTrusted && ev.target instanceof Element && ev.target.closest(site.send)) noteSent();
    },
    true,
  );
  document.addEventListener(
    "keydown",
    (ev) => {
      if (!site || !ev.isTrusted || ev.key !== "Enter" || ev.shiftKey || ev.isComposing) return;
      if (ev.target instanceof Element && ev.target.closest(site.composer)) noteSent();
    },
    true,
  );

  function hubOrigin() {
    const hub = (settings.hubUrl || "ws://127.0.0.1:8765/ws").replace(/^ws(s?):\/\//, "http$1://").replace(/\/ws\/?$/, "");
    try {
      return new URL(hub).origin;
    } catch {
      return null;
    }
  }

  /** The adapter for this page, or null when toolhub is off here: a
   * supported site the person did not turn off, or a local origin they
   * turned on; never the hub's own pages (its dashboard shows params and
   * results, which may hold blocks). */
  function adapterHere() {
    const origin = location.origin;
    if (origin === hubOrigin()) return null;
    const a = S.forOrigin(origin);
    if (a) return settings.sitesOff.includes(origin) ? null : a;
    if (LOCAL.test(origin) && settings.localOrigins.includes(origin)) return S.generic;
    return null;
  }

  function start() {
    const a = adapterHere();
    if (a === site) return;
    if (!a) return stop();
    site = a;
    enterConversation();
    observer.observe(document.documentElement, { childList: true, subtree: true, characterData: true, attributes: true });
    scheduleScan(0);
  }

  function stop() {
    site = null;
    observer.disconnect();
    clearTimeout(scanTimer);
    scanTimer = null;
  }

  const KEYS = ["insertResult", "autoSubmit", "foldChars", "hubUrl", "localOrigins", "sitesOff"];

  function take(s) {
    settings.insertResult = !!s.insertResult;
    settings.autoSubmit = !!s.autoSubmit;
    settings.foldChars = Number(s.foldChars) > 0 ? Number(s.foldChars) : 20000;
    settings.hubUrl = s.hubUrl || null;
    settings.localOrigins = Array.isArray(s.localOrigins) ? s.localOrigins : [];
    settings.sitesOff = Array.isArray(s.sitesOff) ? s.sitesOff : [];
  }

  chrome.storage.onChanged.addListener((ch, area) => {
    if (area !== "local") return;
    if (KEYS.some((k) => k in ch)) {
      chrome.storage.local.get(KEYS).then((s) => {
        take(s);
        start();
      });
    }
    if ("toolPolicy" in ch && site) {
      // A tool allowed (or refused) since: blocks waiting look again (a
      // block of a live turn may now run by itself; history still waits).
      for (const k of known.values()) {
        if (!k.requested && k.record && (k.record.state === "ready" || k.record.errorFromPolicy)) {
          k.checked = false;
          k.since = 0;
        }
      }
      scheduleScan(0);
    }
  });

  chrome.storage.local
    .get(KEYS)
    .then((s) => {
      take(s);
      start();
    })
    .catch(() => {});
})();
