// claude.ai fixture: messages in div[data-test-render-count] containers; the
// user's in [data-testid="user-message"]; the assistant's in
// div.font-claude-response inside div[data-is-streaming="true"|"false"]
// (true while it streams); code fences as a copy bar, a language label and
// <pre class="code-block__code"><code class="language-…"> with Prism
// token spans (react-syntax-highlighter); the composer: a Tiptap/ProseMirror
// div.tiptap.ProseMirror[contenteditable=true][role=textbox] in a fieldset,
// the send button button[aria-label="Send message"] (disabled while the
// editor is empty), replaced by button[aria-label="Stop response"] while a
// reply streams. References: see index.html.
import { fixture, highlight, el, inline } from "../core.js";
import { mountProseMirror } from "../pm.js";

const messages = document.getElementById("messages");
const dock = document.getElementById("composer-dock");
const dockParent = dock.parentNode;
const slot = document.getElementById("send-slot");
const TOKENS = { key: "token property", string: "token string", number: "token number", literal: "token boolean", punct: "token punctuation", other: null };
let streaming = false;

const sendButton = el("button", { type: "button", "aria-label": "Send message", class: "inline-flex items-center justify-center relative shrink-0 bg-accent-main-000 text-oncolor-100 h-8 w-8 rounded-md" }, "↑");
const stopButton = el("button", { type: "button", "aria-label": "Stop response", class: "inline-flex items-center justify-center relative shrink-0 h-8 w-8 rounded-md" }, "■");

function buttons() {
  const want = streaming ? stopButton : sendButton;
  if (slot.firstChild !== want) slot.replaceChildren(want);
  sendButton.disabled = !editor.text().trim();
}
function send() {
  if (fx._send()) buttons();
  return true;
}

const editor = mountProseMirror(document.getElementById("pm-parent"), {
  attributes: { class: "tiptap ProseMirror", contenteditable: "true", role: "textbox", translate: "no", enterkeyhint: "enter", tabindex: "0", "aria-label": "Write your prompt to Claude", "aria-multiline": "true" },
  placeholder: "How can I help you today?",
  onChange: buttons,
  onEnter: send,
});
sendButton.addEventListener("click", send);

const fx = fixture({
  id: "claude",
  thread: messages,
  userMessage(text, m, i) {
    const body = el("div", { "data-testid": "user-message", class: "font-large !font-user-message grid grid-cols-1 gap-2 py-0.5 break-words" });
    for (const para of text.split(/\n\s*\n/)) body.append(el("p", { class: "whitespace-pre-wrap break-words", text: para }));
    return el("div", { "data-test-render-count": "1" },
      el("div", { class: "mb-1 mt-1" },
        el("div", { class: "group relative inline-flex gap-2 bg-bg-300 rounded-xl pl-2.5 py-2.5 break-words text-text-100 transition-all max-w-[75ch] flex-col pr-6" },
          el("div", { class: "flex flex-row gap-2 relative" },
            el("div", { class: "shrink-0" }, el("div", { class: "flex shrink-0 items-center justify-center rounded-full font-bold select-none h-7 w-7 text-[12px] bg-text-200 text-bg-100", text: "U" })),
            el("div", { class: "flex-1" }, body)))));
  },
  assistantMessage(m) {
    const md = el("div", { class: "standard-markdown grid-cols-1 grid gap-4 [&_>_*]:min-w-0 !gap-3.5" });
    const wrap = el("div", { "data-is-streaming": "false", class: "group relative pb-8", style: "opacity: 1; transform: none;" },
      el("div", { class: "font-claude-response relative leading-[1.65rem] [&_pre>div]:bg-bg-000/50 [&_pre>div]:border-0.5 [&_pre>div]:border-border-400 [&_.ignore-pre-bg>div]:bg-transparent [&_.standard-markdown_:is(p,blockquote,h1,h2,h3,h4,h5,h6)]:pl-2 [&_.standard-markdown_:is(p,blockquote,ul,ol,h1,h2,h3,h4,h5,h6)]:pr-8" },
        el("div", {}, md)),
      el("div", { class: "absolute -bottom-0 -right-1.5" },
        el("div", { class: "flex items-stretch justify-between", role: "group", "aria-label": "Message actions" },
          el("button", { type: "button", "data-testid": "action-bar-copy", "aria-label": "Copy" }, "⧉"),
          el("button", { type: "button", "data-testid": "action-bar-retry", "aria-label": "Retry" }, "↻"))));
    const root = el("div", { "data-test-render-count": "1" }, el("div", { style: "height: auto; opacity: 1; transform: none;" }, wrap));
    return { el: root, body: md, wrap };
  },
  paragraph(text) {
    return inline(text, el("p", { class: "whitespace-normal break-words" }));
  },
  codeBlock(lang, code) {
    const inner = el("span", {});
    inner.append(highlight(code, TOKENS));
    return el("div", { class: "relative group/copy bg-bg-000/50 border-0.5 border-border-400 rounded-lg" },
      el("div", { class: "sticky opacity-0 group-hover/copy:opacity-100 top-2 py-2 h-12 w-0 float-right" },
        el("div", { class: "absolute right-0 h-8 px-2 items-center inline-flex z-10" },
          el("button", { class: "inline-flex items-center justify-center relative shrink-0 h-8 w-8 rounded-md", type: "button", "aria-label": "Copy to clipboard", "data-state": "closed" }, el("div", { class: "relative" }, el("span", { "aria-hidden": "true", text: "⧉" }))))),
      el("div", { class: "text-text-500 font-small p-3.5 pb-0", text: lang || "text" }),
      el("div", { class: "overflow-x-auto" },
        el("pre", { class: "code-block__code !my-0 !rounded-lg !text-sm !leading-relaxed", style: "background: transparent; color: rgb(56, 58, 66); font-family: var(--font-mono); direction: ltr; text-align: left; white-space: pre; word-spacing: normal; word-break: normal; line-height: 1.5; tab-size: 2; hyphens: none; padding: 1em; margin: 0.5em 0px; overflow: auto; border-radius: 0.3em;" },
          el("code", { class: lang ? `language-${lang}` : "", style: "white-space: pre;" }, inner))));
  },
  streaming(entry, on) {
    streaming = on;
    entry.el.querySelector("[data-is-streaming]").setAttribute("data-is-streaming", on ? "true" : "false");
    buttons();
  },
  composer: editor,
  isShare: (loc) => /^\/share\//.test(loc.pathname),
  shareMode(share) {
    document.querySelector(".share-banner").hidden = !share;
    if (share && dock.isConnected) dock.remove();
    if (!share && !dock.isConnected) dockParent.insertBefore(dock, document.querySelector(".share-banner"));
  },
});
buttons();
