// gemini.google.com: how the content script reads it (see extension/sites.js
// for the interface, docs/extension-sites.md for the list of sites).
//
// Public references for the DOM (late 2025 / 2026):
//   - MCP-SuperAssistant (srbhptl39/MCP-SuperAssistant) gemini.adapter.ts,
//     defaultConfigs/gemini.config.ts, components/websites/gemini/
//     chatInputHandler.ts: the Quill editor div.ql-editor.textarea.new-input-ui
//   - Gemini exporters and userscripts (code index): .conversation-container,
//     user-query .query-text, model-response, message-content,
//     .markdown.markdown-main-panel, rich-textarea .ql-editor,
//     button.send-button, button.send-button.stop and
//     button[aria-label="Stop response"] while a turn is in progress
//   - buihongduc132/bhd-gemini-ctx flow/gemini_ui_structure.md (/app/<id>)
//   - share links: https://gemini.google.com/share/<id> (g.co/gemini/share/…
//     redirects there)
// The composer is Quill's .ql-editor, never Quill's hidden div.ql-clipboard
// (also contenteditable, and the last one in rich-textarea).
(function () {
  "use strict";
  const ASSISTANT = "message-content.model-response-text, model-response message-content";
  const STOP = 'button.send-button.stop, button[aria-label="Stop response"]';

  function isLast(msg, doc) {
    const all = doc.querySelectorAll(ASSISTANT);
    return all[all.length - 1] === msg;
  }

  ToolhubSites.add({
    id: "gemini",
    name: "Gemini",
    origins: ["https://gemini.google.com"],
    assistant: ASSISTANT,
    user: "user-query",
    composer: 'rich-textarea .ql-editor[contenteditable="true"]',
    send: 'button.send-button:not(.stop), button[aria-label="Send message"]',
    quoted: "blockquote",
    streaming(msg, doc) {
      if (msg.querySelector('[aria-busy="true"]') || msg.getAttribute("aria-busy") === "true") return true;
      return !!doc.querySelector(STOP) && isLast(msg, doc);
    },
    isShare(url) {
      const u = new URL(url, "https://gemini.google.com");
      return /^\/share\//.test(u.pathname);
    },
    messageId(msg, index) {
      return msg.id || (msg.closest(".conversation-container") || {}).id || `#${index}`;
    },
  });
})();
