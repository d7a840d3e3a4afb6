// The part every site fixture shares: the conversation store (localStorage,
// one key per conversation path), the markdown renderer (paragraphs, inline
// code, ``` fences with highlight spans that split the text, an unclosed
// fence rendered as code while it streams, as the real sites do), streaming
// chunk by chunk with a re-render of the message at every chunk, in-app
// navigation, and the test API on window.fixture (docs/extension-sites.md).
//
// Each site's app.js (bundled by serve.mjs with esbuild, with its real
// editor from npm) calls fixture(site) with its own DOM:
//   thread                 element the messages go into
//   userMessage(text, m)   → element of one user message (appended to thread)
//   assistantMessage(m, i) → {el, body}: el is appended to thread, body is
//                            where the markdown of m.text is rendered
//   codeBlock(lang, code, hl) → element of one fenced block (hl: highlight)
//   paragraph(text)        → element of one paragraph (default <p>)
//   streaming(entry, on)   sets or clears the site's streaming markers
//   composer               {text(), clear(), focus()} the real editor
//   isShare(location)      the page is a shared conversation (read-only)
//   shareMode(on)          hides the composer on a shared conversation
//   afterRender()          optional, after every full render
"use strict";

const KEY = "fixture-conversation:";

export function convKey(loc = location) {
  return KEY + loc.pathname + loc.search;
}

export function uuid() {
  return crypto.randomUUID();
}

/** JSON-ish code as highlight spans: keys, strings, numbers, literals, punctuation. */
export function highlight(code, cls) {
  const frag = document.createDocumentFragment();
  const re = /("(?:[^"\\\n]|\\.)*"?)(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)|(true|false|null)\b|([{}\[\],:])|(\s+)|([^\s"{}\[\],:]+)/g;
  let m;
  const span = (c, t) => {
    if (!c) return frag.append(document.createTextNode(t));
    const s = document.createElement("span");
    s.className = c;
    s.textContent = t;
    frag.append(s);
  };
  while ((m = re.exec(code))) {
    if (m[1] !== undefined) {
      span(m[2] ? cls.key : cls.string, m[1]);
      if (m[2]) {
        const ws = m[2].slice(0, -1);
        if (ws) span(null, ws);
        span(cls.punct, ":");
      }
    } else if (m[3] !== undefined) span(cls.number, m[3]);
    else if (m[4] !== undefined) span(cls.literal, m[4]);
    else if (m[5] !== undefined) span(cls.punct, m[5]);
    else if (m[6] !== undefined) span(null, m[6]);
    else span(cls.other, m[7]);
  }
  return frag;
}

function inline(text, el) {
  // `code` spans; the rest as text (the sites' other markdown is not needed)
  const parts = text.split(/(`[^`\n]+`)/);
  for (const p of parts) {
    if (/^`[^`\n]+`$/.test(p)) {
      const c = document.createElement("code");
      c.textContent = p.slice(1, -1);
      el.append(c);
    } else if (p) el.append(document.createTextNode(p));
  }
  return el;
}

/** Markdown → a fragment, with the site's code blocks and paragraphs. */
export function markdown(text, site) {
  const frag = document.createDocumentFragment();
  const lines = text.split("\n");
  let para = [];
  let code = null; // {lang, lines, start}
  let lineNo = 0;
  const flushPara = () => {
    if (!para.length) return;
    const t = para.join("\n");
    const p = site.paragraph ? site.paragraph(t, lineNo - para.length, lineNo - 1) : inline(t, document.createElement("p"));
    frag.append(p);
    para = [];
  };
  for (const line of lines) {
    const fence = /^\s*```\s*([\w-]*)\s*$/.exec(line);
    if (code) {
      if (/^\s*```\s*$/.test(line)) {
        frag.append(site.codeBlock(code.lang, code.lines.join("\n"), code.start, lineNo));
        code = null;
      } else code.lines.push(line);
    } else if (fence) {
      flushPara();
      code = { lang: fence[1] || "", lines: [], start: lineNo };
    } else if (!line.trim()) flushPara();
    else para.push(line);
    lineNo++;
  }
  flushPara();
  // an open fence (the text is still streaming) renders as code already
  if (code) frag.append(site.codeBlock(code.lang, code.lines.join("\n"), code.start, lineNo - 1));
  return frag;
}

export { inline };

export function fixture(site) {
  const api = {
    submitted: [],
    site: site.id,
  };
  let entries = []; // {m, el, body}
  let messages = [];
  let streamingNow = null;

  // a conversation the server seeded (serve.mjs: sites.seed) when this
  // browser has none for the path yet
  const seeds = window.__fixtureSeeds || {};
  for (const [p, msgs] of Object.entries(seeds)) {
    if (localStorage.getItem(KEY + p) === null) localStorage.setItem(KEY + p, JSON.stringify(msgs));
  }

  function load() {
    try {
      messages = JSON.parse(localStorage.getItem(convKey()) || "[]");
    } catch {
      messages = [];
    }
    for (const m of messages) if (!m.id) m.id = uuid();
  }
  function save() {
    localStorage.setItem(convKey(), JSON.stringify(messages));
  }

  function renderOne(m, i) {
    if (m.role === "user") {
      const el = site.userMessage(m.text, m, i);
      site.thread.append(el);
      return { m, el, body: null };
    }
    const { el, body } = site.assistantMessage(m, i);
    body.replaceChildren(markdown(m.text, site));
    site.thread.append(el);
    return { m, el, body };
  }

  function renderAll() {
    site.thread.replaceChildren();
    load();
    entries = messages.map(renderOne);
    const share = !!site.isShare(location);
    document.documentElement.dataset.fixtureShare = share ? "1" : "0";
    site.shareMode && site.shareMode(share);
    // a re-render while a reply streams: the new nodes carry on streaming
    if (streamingNow && streamingNow.key === convKey() && entries[streamingNow.index]) {
      const ne = entries[streamingNow.index];
      streamingNow.e.el = ne.el;
      streamingNow.e.body = ne.body;
      site.streaming(streamingNow.e, true);
    }
    site.afterRender && site.afterRender();
  }

  function add(m) {
    if (!m.id) m.id = uuid();
    messages.push(m);
    save();
    const e = renderOne(m, messages.length - 1);
    entries.push(e);
    return e;
  }

  api.say = (text) => {
    add({ role: "assistant", text });
    return messages.length - 1;
  };

  api.userSays = (text) => {
    add({ role: "user", text });
    return messages.length - 1;
  };

  api.stream = (text, { chunk = 9, everyMs = 12 } = {}) =>
    new Promise((resolve, reject) => {
      if (streamingNow) return reject(new Error("already streaming"));
      const key = convKey();
      const e = add({ role: "assistant", text: "" });
      const index = messages.length - 1;
      streamingNow = { e, index, key };
      site.streaming(e, true);
      let n = 0;
      const tick = () => {
        // the person navigated away: this tab stops rendering the turn
        const m = messages[index];
        if (convKey() !== key || !m || !e.el.isConnected) {
          site.streaming(e, false);
          streamingNow = null;
          return resolve(index);
        }
        n = Math.min(text.length, n + chunk);
        m.text = text.slice(0, n);
        save();
        e.body.replaceChildren(markdown(m.text, site));
        if (n < text.length) return setTimeout(tick, everyMs);
        site.streaming(e, false);
        streamingNow = null;
        resolve(index);
      };
      setTimeout(tick, everyMs);
    });

  api.navigate = (path) => {
    history.pushState({}, "", path);
    renderAll();
  };

  api.seed = (path, msgs) => {
    const u = new URL(path, location.origin);
    localStorage.setItem(KEY + u.pathname + u.search, JSON.stringify(msgs.map((m) => ({ id: uuid(), ...m }))));
  };

  api.rerender = () => renderAll();

  api.composerText = () => (site.composer ? site.composer.text() : "");

  api.messages = () => messages.map((m) => ({ role: m.role, text: m.text }));

  api.isStreaming = () => !!streamingNow;

  /** What the site does on send (button or Enter): a user message, the editor cleared. */
  api._send = () => {
    if (!site.composer || streamingNow) return false;
    const text = site.composer.text().replace(/\s+$/, "");
    if (!text.trim()) return false;
    api.submitted.push(text);
    site.composer.clear();
    api.userSays(text);
    return true;
  };

  window.addEventListener("popstate", renderAll);
  window.fixture = api;
  renderAll();
  document.documentElement.dataset.fixtureReady = "1";
  return api;
}

/** A DOM element: el("div", {class, text, html, attr: value}, ...children). */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === false || v === null || v === undefined) continue;
    if (k === "class") e.className = v;
    else if (k === "text") e.textContent = v;
    else if (k === "html") e.innerHTML = v;
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}
