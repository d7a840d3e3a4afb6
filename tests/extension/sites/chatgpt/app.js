// chatgpt.com fixture: the conversation DOM (article turns with
// div[data-message-author-role] and data-message-id; the assistant's
// markdown in div.markdown.prose, streaming marked by .result-streaming on it
// and by the stop button that replaces the send button), code fences as
// <pre> with a language header, a copy button and highlight.js spans, and the
// composer: ProseMirror div#prompt-textarea.ProseMirror next to the hidden
// fallback textarea; the send button (data-testid="send-button") shows only
// when the editor has text (the voice button otherwise), as on the site.
// References: see index.html.
import { fixture, highlight, el, inline } from "../core.js";
import { mountProseMirror } from "../pm.js";

const turns = document.getElementById("turns");
const form = document.querySelector("form[data-type=unified-composer]");
const formParent = form.parentNode;
const trailing = document.getElementById("trailing");
const HL = { key: "hljs-attr", string: "hljs-string", number: "hljs-number", literal: "hljs-literal", punct: "hljs-punctuation", other: null };
let streaming = false;

const speechButton = el("button", { type: "button", "data-testid": "composer-speech-button", "aria-label": "Start voice mode", class: "composer-submit-btn composer-secondary-button-color" }, "🎙");
const sendButton = el("button", { type: "button", id: "composer-submit-button", "data-testid": "send-button", "aria-label": "Send prompt", class: "composer-submit-btn composer-submit-button-color h-9 w-9" }, "↑");
const stopButton = el("button", { type: "button", id: "composer-submit-button", "data-testid": "stop-button", "aria-label": "Stop streaming", class: "composer-submit-btn composer-submit-button-color h-9 w-9" }, "■");

function trailingButtons() {
  const want = streaming ? stopButton : editor.text().trim() ? sendButton : speechButton;
  if (trailing.firstChild !== want) trailing.replaceChildren(want);
}

function send() {
  if (fx._send()) trailingButtons();
  return true;
}

const editor = mountProseMirror(document.getElementById("pm-parent"), {
  attributes: { id: "prompt-textarea", class: "ProseMirror", contenteditable: "true", translate: "no", "data-virtualkeyboard": "true" },
  placeholder: "Ask anything",
  onChange: trailingButtons,
  onEnter: send,
});
sendButton.addEventListener("click", (e) => {
  e.preventDefault();
  send();
});
form.addEventListener("submit", (e) => {
  e.preventDefault();
  send();
});

function turn(role) {
  const n = turns.children.length + 1;
  return el("article", { class: "text-token-text-primary w-full focus:outline-none", tabindex: "-1", dir: "auto", "data-testid": `conversation-turn-${n}`, "data-scroll-anchor": "false", "data-turn": role });
}

const fx = fixture({
  id: "chatgpt",
  thread: turns,
  userMessage(text, m) {
    const a = turn("user");
    a.append(
      el("h5", { class: "sr-only", text: "You said:" }),
      el("div", { class: "text-base my-auto mx-auto" },
        el("div", { class: "mx-auto flex max-w-(--thread-content-max-width) flex-1 text-base" },
          el("div", { class: "group/turn-messages flex w-full min-w-0 flex-col" },
            el("div", { class: "flex max-w-full flex-col grow" },
              el("div", { "data-message-author-role": "user", "data-message-id": m.id, dir: "auto", class: "min-h-8 text-message relative flex w-full flex-col items-end gap-2 text-start break-words whitespace-normal" },
                el("div", { class: "flex w-full flex-col gap-1 empty:hidden items-end rtl:items-start" },
                  el("div", { class: "user-message-bubble-color relative max-w-[var(--user-chat-width,70%)] rounded-[18px] px-4 py-1.5" },
                    el("div", { class: "whitespace-pre-wrap", text })))))))),
    );
    return a;
  },
  assistantMessage(m) {
    const a = turn("assistant");
    const body = el("div", { class: "markdown prose dark:prose-invert w-full break-words light markdown-new-styling" });
    a.append(
      el("h6", { class: "sr-only", text: "ChatGPT said:" }),
      el("div", { class: "text-base my-auto mx-auto" },
        el("div", { class: "mx-auto flex max-w-(--thread-content-max-width) flex-1 text-base" },
          el("div", { class: "group/turn-messages flex w-full min-w-0 flex-col" },
            el("div", { class: "flex max-w-full flex-col grow" },
              el("div", { "data-message-author-role": "assistant", "data-message-id": m.id, "data-message-model-slug": "gpt-5", dir: "auto", class: "min-h-8 text-message relative flex w-full flex-col items-end gap-2 text-start break-words whitespace-normal" },
                el("div", { class: "flex w-full flex-col gap-1 empty:hidden first:pt-[3px]" }, body)))),
          el("div", { class: "flex min-h-[46px] justify-start" },
            el("div", { class: "touch:-me-2 touch:-ms-3.5 -ms-2.5 -me-1 flex flex-wrap items-center" },
              el("button", { class: "text-token-text-secondary", "aria-label": "Copy", "data-testid": "copy-turn-action-button" }, "⧉"))))),
    );
    return { el: a, body };
  },
  paragraph(text) {
    return inline(text, el("p", { "data-start": "0", "data-end": String(text.length) }));
  },
  codeBlock(lang, code) {
    const c = el("code", { class: `whitespace-pre! ${lang ? "language-" + lang : ""}` });
    c.append(highlight(code, HL));
    return el("pre", { class: "overflow-visible!", "data-start": "0", "data-end": "0" },
      el("div", { class: "contain-inline-size rounded-2xl relative bg-token-sidebar-surface-primary" },
        el("div", { class: "flex items-center text-token-text-secondary px-4 py-2 text-xs font-sans justify-between h-9 bg-token-sidebar-surface-primary select-none rounded-t-2xl", text: lang || "plaintext" }),
        el("div", { class: "sticky top-9" },
          el("div", { class: "absolute end-0 bottom-0 flex h-9 items-center pe-2" },
            el("div", { class: "bg-token-bg-elevated-secondary text-token-text-secondary flex items-center gap-4 rounded-sm px-2 font-sans text-xs" },
              el("button", { class: "flex gap-1 items-center select-none py-1", "aria-label": "Copy" }, "Copy code")))),
        el("div", { class: "overflow-y-auto p-4", dir: "ltr" }, c)));
  },
  streaming(entry, on) {
    streaming = on;
    entry.body.classList.toggle("result-streaming", on);
    entry.body.classList.toggle("streaming-animation", on);
    trailingButtons();
  },
  composer: editor,
  isShare: (loc) => /^\/share\//.test(loc.pathname),
  shareMode(share) {
    const footer = document.querySelector(".share-footer");
    footer.hidden = !share;
    if (share && form.isConnected) form.remove();
    if (!share && !form.isConnected) formParent.prepend(form);
  },
});
trailingButtons();
