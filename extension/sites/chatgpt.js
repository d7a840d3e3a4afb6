// chatgpt.com: how the content script reads it (see extension/sites.js for
// the interface, docs/extension-sites.md for the list of sites).
//
// Public references for the DOM (late 2025 / 2026):
//   - MCP-SuperAssistant (srbhptl39/MCP-SuperAssistant) chatgpt.adapter.ts,
//     components/websites/chatgpt/chatInputHandler.ts and the render config
//     (div[data-message-author-role="user"], #prompt-textarea,
//     button[data-testid="send-button"])
//   - vannguyenvn12/chatgpt-inject src/page-main/selectors.js
//     (div#prompt-textarea.ProseMirror[contenteditable="true"])
//   - ujiro99/prompt-history services/aiService/chatgpt/chatGptDefinitions.ts
//   - a ChatGPT Markdown exporter (rhythmpedia.com/bookmarklet.html):
//     .text-message, data-message-author-role, .markdown, <pre> code blocks
//   - assistant streaming: .result-streaming on the message's div.markdown,
//     and button[data-testid="stop-button"] replacing the send button
//     (the same markers chatgpt exporters and "continue" userscripts wait on)
//   - share links: https://chatgpt.com/share/<uuid> (and /share/e/<uuid>)
(function () {
  "use strict";
  const ASSISTANT = 'div[data-message-author-role="assistant"]';

  function isLast(msg, doc) {
    const all = doc.querySelectorAll(ASSISTANT);
    return all[all.length - 1] === msg;
  }

  ToolhubSites.add({
    id: "chatgpt",
    name: "ChatGPT",
    origins: ["https://chatgpt.com"],
    assistant: ASSISTANT,
    user: 'div[data-message-author-role="user"]',
    // the ProseMirror editor, not the hidden fallback textarea of the same name
    composer: 'div#prompt-textarea.ProseMirror[contenteditable="true"]',
    send: 'button[data-testid="send-button"]',
    quoted: "blockquote",
    streaming(msg, doc) {
      if (msg.matches(".result-streaming, .streaming-animation")) return true;
      if (msg.querySelector(".result-streaming, .streaming-animation")) return true;
      // the stop button stands for the turn being written: the last message
      return !!doc.querySelector('button[data-testid="stop-button"]') && isLast(msg, doc);
    },
    isShare(url) {
      const u = new URL(url, "https://chatgpt.com");
      return /^\/share\//.test(u.pathname) || /^\/g\/[^/]+\/share\//.test(u.pathname);
    },
    messageId(msg, index) {
      return msg.getAttribute("data-message-id") || `#${index}`;
    },
  });
})();
