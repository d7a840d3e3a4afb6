// gemini.google.com fixture: each turn a div.conversation-container holding
// <user-query> (.query-text > p.query-text-line) and <model-response>, whose
// reply is in message-content.model-response-text >
// div.markdown.markdown-main-panel[aria-live=polite][aria-busy] (aria-busy
// "true" while it streams); code fences as <code-block> with a language
// header, a copy button (mat-icon ligature text) and <pre><code
// data-test-id="code-content"> with highlight.js spans; the composer: Quill
// 2 in <rich-textarea> (div.ql-editor.textarea.new-input-ui) followed by the
// hidden contenteditable div.ql-clipboard; the send button
// (button.send-button.submit, aria-label "Send message") shows only when the
// editor has text, and is button.send-button.stop (aria-label "Stop
// response") while a reply streams. References: see index.html.
import Quill from "quill";
import { fixture, highlight, el, inline } from "../core.js";

const scroller = document.getElementById("scroller");
const inputArea = document.getElementById("input-area");
const inputParent = inputArea.parentNode;
const sendContainer = document.getElementById("send-container");
const HL = { key: "hljs-attr", string: "hljs-string", number: "hljs-number", literal: "hljs-literal", punct: "hljs-punctuation", other: null };
let streaming = false;

const rich = document.getElementById("rich");
const quill = new Quill(rich, {
  placeholder: "Ask Gemini",
  modules: {
    keyboard: {
      bindings: {
        send: { key: "Enter", shiftKey: false, handler: () => (send(), false) },
      },
    },
  },
});
const editorEl = rich.querySelector(".ql-editor");
editorEl.classList.add("textarea", "new-input-ui");
editorEl.setAttribute("role", "textbox");
editorEl.setAttribute("aria-multiline", "true");
editorEl.setAttribute("aria-label", "Enter a prompt here");
editorEl.setAttribute("data-gramm", "false");
// the page's Quill keeps a hidden contenteditable clipboard after the editor
rich.append(el("div", { class: "ql-clipboard", contenteditable: "true", tabindex: "-1" }));

const composer = {
  text: () => quill.getText().replace(/\n$/, ""),
  clear: () => quill.setText(""),
  focus: () => quill.focus(),
};

const sendButton = el("button", { class: "send-button submit", "aria-label": "Send message", "aria-disabled": "false", "mat-icon-button": "" }, el("mat-icon", { class: "mat-icon notranslate send-button-icon google-symbols", fonticon: "send", "aria-hidden": "true", text: "send" }));
const stopButton = el("button", { class: "send-button stop", "aria-label": "Stop response", "mat-icon-button": "" }, el("mat-icon", { class: "mat-icon notranslate google-symbols", fonticon: "stop", "aria-hidden": "true", text: "stop" }));
function buttons() {
  const want = streaming ? stopButton : composer.text().trim() ? sendButton : null;
  if (sendContainer.firstChild !== want) sendContainer.replaceChildren(...(want ? [want] : []));
  sendContainer.classList.toggle("visible", !!want);
}
function send() {
  if (fx._send()) buttons();
}
sendButton.addEventListener("click", send);
quill.on("text-change", buttons);

function hexId(m) {
  return m.id.replace(/-/g, "").slice(0, 16);
}

const fx = fixture({
  id: "gemini",
  thread: scroller,
  userMessage(text, m, i) {
    const qt = el("div", { role: "heading", "aria-level": "2", class: "query-text gds-body-l", dir: "ltr" });
    for (const line of text.split("\n")) qt.append(el("p", { class: "query-text-line ng-star-inserted", text: line }));
    return el("div", { class: "conversation-container message-actions-hover-boundary ng-star-inserted", id: hexId(m) },
      el("user-query", { class: "ng-star-inserted" },
        el("span", { class: "user-query-container right-align-content" },
          el("user-query-content", { class: "user-query-container" },
            el("div", { class: "user-query-container user-query-bubble-container" },
              el("div", { class: "query-content ng-star-inserted", id: `user-query-content-${i}` },
                el("span", { class: "cdk-visually-hidden", text: "You said " }), qt))))));
  },
  assistantMessage(m) {
    const last = scroller.lastElementChild;
    const container = last && last.matches(".conversation-container") && !last.querySelector("model-response")
      ? last
      : el("div", { class: "conversation-container message-actions-hover-boundary ng-star-inserted", id: hexId(m) });
    const body = el("div", { class: "markdown markdown-main-panel tutor-markdown-rendering enable-updated-hr-color", id: `model-response-message-content-r_${hexId(m)}`, "aria-live": "polite", "aria-busy": "false", dir: "ltr" });
    container.append(
      el("model-response", { class: "ng-star-inserted" },
        el("div", { class: "ng-star-inserted" },
          el("response-container", { class: "ng-tns-c1 ng-star-inserted reduced-bottom-padding" },
            el("div", { class: "response-container ng-tns-c1 response-container-with-gpi ng-star-inserted" },
              el("div", { class: "presented-response-container ng-tns-c1" },
                el("div", { class: "response-container-content ng-tns-c1" },
                  el("span", { class: "cdk-visually-hidden", text: "Gemini said " }),
                  el("div", { class: "response-content ng-tns-c1" },
                    el("message-content", { class: "model-response-text ng-star-inserted", id: `message-content-id-r_${hexId(m)}` }, body)))))),
          el("message-actions", { class: "ng-star-inserted" },
            el("div", { class: "actions-container-v2" },
              el("button", { "aria-label": "Good response", "mat-icon-button": "" }, el("mat-icon", { fonticon: "thumb_up", text: "thumb_up" })),
              el("button", { "aria-label": "Copy", "mat-icon-button": "" }, el("mat-icon", { fonticon: "content_copy", text: "content_copy" })))))));
    return { el: container, body };
  },
  paragraph(text, from) {
    return inline(text, el("p", { "data-path-to-node": String(from) }));
  },
  codeBlock(lang, code) {
    const c = el("code", { role: "text", "data-test-id": "code-content", class: "code-container formatted ng-tns-c2" });
    c.append(highlight(code, HL));
    return el("code-block", { class: "ng-tns-c2 ng-star-inserted" },
      el("div", { class: "code-block ng-tns-c2 ng-star-inserted ng-animate-disabled" },
        el("div", { class: "code-block-decoration header-formatted gds-title-s ng-tns-c2 ng-star-inserted" },
          el("span", { class: "ng-tns-c2", text: lang ? lang.toUpperCase() : "" }),
          el("div", { class: "buttons ng-tns-c2 ng-star-inserted" },
            el("button", { "aria-label": "Copy code", class: "mdc-icon-button mat-mdc-icon-button copy-button", "mat-icon-button": "" },
              el("mat-icon", { class: "mat-icon notranslate google-symbols", fonticon: "content_copy", "aria-hidden": "true", text: "content_copy" })))),
        el("div", { class: "formatted-code-block-internal-container ng-tns-c2" },
          el("div", { class: "animated-opacity ng-tns-c2" }, el("pre", { class: "ng-tns-c2" }, c)))));
  },
  streaming(entry, on) {
    streaming = on;
    entry.body.setAttribute("aria-busy", on ? "true" : "false");
    buttons();
  },
  composer,
  isShare: (loc) => /^\/share\//.test(loc.pathname),
  shareMode(share) {
    document.querySelector(".share-landing").hidden = !share;
    if (share && inputArea.isConnected) inputArea.remove();
    if (!share && !inputArea.isConnected) inputParent.append(inputArea);
  },
});
buttons();
