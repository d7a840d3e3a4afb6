// Finding Ω{…} blocks in the DOM of one message: its text as the parser
// sees it (scripts, editable elements and toolhub's own result elements left
// out) and the element that holds each complete block. Loaded by the content
// script after blocks.js (sets globalThis.ToolhubScan).
(function (root) {
  "use strict";

  const SKIP_TAGS = new Set(["SCRIPT", "STYLE", "NOSCRIPT", "TEXTAREA", "INPUT", "SELECT", "TEMPLATE"]);
  const BLOCKISH = "pre, p, li, blockquote, td, th, h1, h2, h3, h4, h5, h6, div, article, section, main";

  function isOmega(c) {
    return c === "\u03A9" || c === "\u2126";
  }

  function skipped(n) {
    return SKIP_TAGS.has(n.tagName) || n.hasAttribute("data-toolhub-call") || n.isContentEditable;
  }

  function excluded(el, stop) {
    for (let e = el; e && e !== stop && e !== document.body; e = e.parentElement) if (skipped(e)) return true;
    return false;
  }

  /** The text of `el` as the parser sees it (our result elements, scripts
   * and editable elements left out), and where each Ω is in it. */
  function textOf(el) {
    const parts = [];
    const omegas = [];
    let offset = 0;
    const w = document.createTreeWalker(el, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT, {
      acceptNode(n) {
        if (n.nodeType === Node.ELEMENT_NODE) return skipped(n) ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_SKIP;
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

  /** Every Ω in `msg`, in document order, as {node, idx}. */
  function omegasIn(msg) {
    const out = [];
    const w = document.createTreeWalker(msg, NodeFilter.SHOW_TEXT);
    for (let n = w.nextNode(); n; n = w.nextNode()) {
      const d = n.data;
      if (!d.includes("\u03A9") && !d.includes("\u2126")) continue;
      if (!n.parentElement || excluded(n.parentElement, msg) || skipped(msg)) continue;
      for (let i = 0; i < d.length; i++) if (isOmega(d[i])) out.push({ node: n, idx: i });
    }
    return out;
  }

  /**
   * Complete blocks of one assistant message, in document order: {holder,
   * block}. The holder is the smallest block-level element (up to six
   * levels above the Ω, never above the message) whose text holds the whole
   * block, so a block spread over paragraphs or highlighted spans is found
   * whole.
   */
  function blocksIn(msg) {
    const handled = new Map(); // node → Set(idx)
    const isHandled = (o) => handled.has(o.node) && handled.get(o.node).has(o.idx);
    const mark = (o) => {
      if (!handled.has(o.node)) handled.set(o.node, new Set());
      handled.get(o.node).add(o.idx);
    };
    const found = [];
    const B = root.ToolhubBlocks;
    for (const om of omegasIn(msg)) {
      if (isHandled(om)) continue;
      let h = om.node.parentElement.closest(BLOCKISH) || om.node.parentElement;
      if (!msg.contains(h)) h = msg;
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
        if (h === msg || h === document.body) break;
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

  root.ToolhubScan = { blocksIn, textOf };
})(typeof globalThis !== "undefined" ? globalThis : this);
