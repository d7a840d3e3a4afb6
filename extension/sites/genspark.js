// www.genspark.ai (agent chat, /agents?id=<uuid>): how the content script
// reads it (see extension/sites.js for the interface, docs/extension-sites.md
// for the list of sites).
//
// Public references for the DOM (2026):
//   - a Genspark DOM survey of 2026-05-02 (Nuxt/Vue): .conversation-content >
//     .conversation-statement.user|.assistant > .conversation-item-desc >
//     .bubble[message-content-id] > .desc > .content; the user's text in
//     <pre><code>, the assistant's in .markdown-viewer
//   - OmniCoder's Genspark content script: textarea.j-search-input,
//     .enter-icon-wrapper (send), .stop-generation-btn (while generating)
//   - a Genspark automation config: textarea.search-input.j-search-input,
//     textarea[name="query"], .enter-icon-wrapper.active, .stop-icon
//   - a Puppeteer Genspark script: textarea[placeholder="Ask anything,
//     create anything"], div.enter-icon-wrapper,
//     div.conversation-item-desc.assistant
// Genspark marks no message as streaming; the stop control in the input
// area stands for the turn being written (the last assistant message).
// Share URLs: Genspark shares a conversation as its own /agents?id=<uuid>
// link (the same URL the owner sees), so isShare cannot tell one from the
// other; a reader's page only ever has history, which never runs by itself.
// isShare holds for the paths that are public views: /share/…, /spark/…
// (Sparkpages) and a ?share… query.
(function () {
  "use strict";
  const ASSISTANT = ".conversation-item-desc.assistant";
  const STOP = ".stop-generation-btn, .enter-icon-wrapper .stop-icon, .input-icon .stop-icon";

  function isLast(msg, doc) {
    const all = doc.querySelectorAll(ASSISTANT);
    return all[all.length - 1] === msg;
  }

  ToolhubSites.add({
    id: "genspark",
    name: "Genspark",
    origins: ["https://www.genspark.ai", "https://genspark.ai"],
    assistant: ASSISTANT,
    user: ".conversation-item-desc.user",
    composer: "textarea.j-search-input, textarea.search-input",
    // the same wrapper holds the stop control while a reply streams
    send: ".enter-icon-wrapper:not(.stop-generation-btn):not(:has(.stop-icon))",
    quoted: "blockquote",
    streaming(msg, doc) {
      return !!doc.querySelector(STOP) && isLast(msg, doc);
    },
    isShare(url) {
      const u = new URL(url, "https://www.genspark.ai");
      return /^\/(share|spark)(\/|$)/.test(u.pathname) || [...u.searchParams.keys()].some((k) => /^share/i.test(k));
    },
    messageId(msg, index) {
      const b = msg.querySelector(".bubble[message-content-id]");
      return b ? `m${b.getAttribute("message-content-id")}` : `#${index}`;
    },
  });
})();
