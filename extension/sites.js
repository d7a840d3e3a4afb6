// Site adapters: what the content script knows of each chat site's DOM.
//
// One file per supported site (extension/sites/<id>.js) calls
// ToolhubSites.add({...}) with data (CSS selectors) and a few hooks; this
// file keeps the registry and the generic adapter used for a local origin the
// person turned on. A site redesign is a change to its one file; how to add a
// site is in docs/extension.md.
//
// An adapter:
//   id          short name ("chatgpt")
//   name        what the popup shows ("ChatGPT")
//   origins     the origins it serves (["https://chatgpt.com"])
//   assistant   CSS selector of ONE assistant message: the element whose text
//               holds the blocks the AI wrote (never a user message)
//   user        CSS selector of one user message (never read for blocks)
//   composer    CSS selector of the real editor the person types into
//   send        CSS selector of the send button
//   streaming(msg, doc) → bool   is this assistant message still being written
//   isShare(url) → bool          a shared or public view of a conversation
//   quoted      optional CSS selector of parts of a message that quote others
//               (blockquotes): a block there is offered, never run by itself
//   messageId(msg, index) → string  optional: a message's stable id (default:
//               its data-message-id or its position among assistant messages)
//   conversation(url) → string   optional: the conversation a URL shows
//               (default: origin + path + query)
//
// Loaded as a classic script before the site files and content.js; node can
// require() it for tests.
(function (root) {
  "use strict";

  const list = [];

  function add(a) {
    for (const k of ["id", "name", "origins", "assistant", "composer", "send", "streaming", "isShare"]) {
      if (a[k] === undefined) throw new Error(`site adapter ${a.id || "?"} lacks ${k}`);
    }
    list.push(a);
    return a;
  }

  /** The adapter for `origin`, or null when the site is not a supported one. */
  function forOrigin(origin) {
    return list.find((a) => a.origins.includes(origin)) || null;
  }

  /**
   * The generic adapter for a local origin the person turned on (a
   * self-hosted chat UI, a test page): the whole page's text outside form
   * fields and editable elements is "the assistant's"; a block that appears
   * after the page loaded counts as a live turn (see content.js).
   */
  const generic = {
    id: "local",
    name: "Local page",
    origins: [],
    generic: true,
    assistant: "body",
    user: null,
    composer: 'textarea, [contenteditable="true"][role="textbox"], [contenteditable="true"]',
    send: 'button[type="submit"], button[aria-label*="Send" i]',
    quoted: "blockquote",
    streaming: () => false,
    isShare: () => false,
  };

  const api = { add, forOrigin, generic, list };
  root.ToolhubSites = api;
  if (typeof module !== "undefined" && module.exports) module.exports = api;
})(typeof globalThis !== "undefined" ? globalThis : this);
