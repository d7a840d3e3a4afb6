// claude.ai: how the content script reads it (see extension/sites.js for the
// interface, docs/extension-sites.md for the list of sites).
//
// Public references for the DOM (late 2025 / 2026):
//   - mattmireles/Hyperchat documentation/Websites/Claude/claude-notes.md
//     (Tiptap/ProseMirror contenteditable composer, Radix, obfuscated classes)
//   - the Claude provider of an Obsidian exporter (checks.js notes):
//     [data-test-render-count] containers, [data-testid="user-message"],
//     .font-claude-response for the assistant
//   - a claude.ai selector config of an automation tool: div.ProseMirror,
//     button[aria-label='Send message'], div.font-claude-message,
//     div[data-is-streaming='false'] around a finished reply
//   - OneClickPrompts buttons-clicking-claude.js (send/stop buttons)
//   - xiaolai/insidebar-ai claude-history-extractor (data-test-render-count)
//   - share links: https://claude.ai/share/<uuid>
// .font-claude-message is the older class of the same element; a nested one
// is not counted twice.
(function () {
  "use strict";
  const ASSISTANT = ".font-claude-response, .font-claude-message:not(.font-claude-response *)";

  function isLast(msg, doc) {
    const all = doc.querySelectorAll(ASSISTANT);
    return all[all.length - 1] === msg;
  }

  ToolhubSites.add({
    id: "claude",
    name: "Claude",
    origins: ["https://claude.ai"],
    assistant: ASSISTANT,
    user: '[data-testid="user-message"]',
    composer: 'div.ProseMirror[contenteditable="true"]',
    send: 'button[aria-label="Send message"], button[aria-label="Send Message"]',
    quoted: "blockquote",
    streaming(msg, doc) {
      const w = msg.closest("[data-is-streaming]");
      if (w) return w.getAttribute("data-is-streaming") === "true";
      if (msg.querySelector('[data-is-streaming="true"]')) return true;
      return !!doc.querySelector('button[aria-label="Stop response"]') && isLast(msg, doc);
    },
    isShare(url) {
      const u = new URL(url, "https://claude.ai");
      return /^\/share\//.test(u.pathname);
    },
  });
})();
