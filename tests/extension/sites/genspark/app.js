// www.genspark.ai fixture (agent chat, /agents?id=<uuid>): a Nuxt/Vue page
// (data-v-* scoped attributes) with .conversation-content holding
// .conversation-statement.user|.assistant > .conversation-item-desc.<role>
// > .bubble[message-content-id=N] > .desc > .content; the user's text as
// plain text in <pre><code> (so a block the person typed is in a <pre> too),
// the assistant's markdown in .markdown-viewer (markdown-it with
// data-source-line on each block, highlight.js spans in code fences); the
// composer: textarea.search-input.j-search-input (name="query"), Enter
// sends; the send button is div.enter-icon-wrapper (.active when there is
// text) holding div.enter-icon; while a reply streams it holds svg.stop-icon
// instead (and .stop-generation-btn). References: see index.html.
import { fixture, highlight, el, inline } from "../core.js";

const conv = document.getElementById("conversation");
const dock = document.getElementById("input-dock");
const dockParent = dock.parentNode;
const icon = document.getElementById("input-icon");
const ta = document.querySelector("textarea.j-search-input");
const HL = { key: "hljs-attr", string: "hljs-string", number: "hljs-number", literal: "hljs-literal", punct: "hljs-punctuation", other: null };
const V = "data-v-b1405ed7";
let streaming = false;

const NS = "http://www.w3.org/2000/svg";
function svg(cls) {
  const s = document.createElementNS(NS, "svg");
  s.setAttribute("class", cls);
  s.setAttribute("viewBox", "0 0 16 16");
  s.setAttribute("width", "16");
  s.setAttribute("height", "16");
  const r = document.createElementNS(NS, "path");
  r.setAttribute("d", cls.includes("stop") ? "M4 4h8v8H4z" : "M8 2l5 5H9v7H7V7H3z");
  s.append(r);
  return s;
}
const enterIcon = el("div", { class: "enter-icon-wrapper", "data-v-7e6f5d4c": "" }, el("div", { class: "enter-icon cursor-pointer" }, svg("enter-svg")));
const stopIcon = el("div", { class: "enter-icon-wrapper bg-[#232425] text-[#fff] stop-generation-btn", "data-v-7e6f5d4c": "" }, svg("stop-icon"));

const composer = {
  text: () => ta.value,
  clear() {
    ta.value = "";
    ta.dispatchEvent(new Event("input", { bubbles: true }));
  },
  focus: () => ta.focus(),
};
function buttons() {
  const want = streaming ? stopIcon : enterIcon;
  if (icon.firstChild !== want) icon.replaceChildren(want);
  const has = !!ta.value.trim();
  enterIcon.classList.toggle("active", has);
  enterIcon.firstChild.classList.toggle("active", has);
}
function send() {
  if (fx._send()) buttons();
}
ta.addEventListener("input", buttons);
ta.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    send();
  }
});
enterIcon.addEventListener("click", send);

const bubbleNo = () => conv.querySelectorAll(".bubble[message-content-id]").length;

const fx = fixture({
  id: "genspark",
  thread: conv,
  userMessage(text) {
    return el("div", { class: "conversation-statement user", [V]: "" },
      el("div", { class: "conversation-item-desc user", [V]: "" },
        el("div", { class: "bubble", "message-content-id": String(bubbleNo()), [V]: "" },
          el("div", { class: "desc", [V]: "" },
            el("div", { class: "content", [V]: "" }, el("pre", {}, el("code", { text })))))),
      el("div", { class: "message-actions-user", [V]: "" }, el("div", { class: "button" }, el("div", { class: "label", text: "Copy" }))));
  },
  assistantMessage() {
    const viewer = el("div", { class: "markdown-viewer", "data-v-3f2e1d0c": "" });
    const root = el("div", { class: "conversation-statement assistant", [V]: "" },
      el("div", { class: "conversation-item-desc assistant", [V]: "" },
        el("div", { class: "bubble", "message-content-id": String(bubbleNo()), [V]: "" },
          el("div", { class: "desc", [V]: "" }, el("div", { class: "content", [V]: "" }, viewer))),
        el("div", { class: "message-actions", [V]: "" }, el("div", { class: "button" }, el("div", { class: "label", text: "Copy" })))));
    return { el: root, body: viewer };
  },
  paragraph(text, from, to) {
    return inline(text, el("p", { "data-source-line": `${from}-${to}` }));
  },
  codeBlock(lang, code, from, to) {
    const c = el("code", { class: `hljs${lang ? " language-" + lang : ""}` });
    c.append(highlight(code, HL));
    return el("pre", { "data-source-line": `${from}-${to}` }, c);
  },
  streaming(entry, on) {
    streaming = on;
    buttons();
  },
  composer,
  isShare: (loc) => /^\/share\//.test(loc.pathname),
  shareMode(share) {
    document.querySelector(".share-cta").hidden = !share;
    if (share && dock.isConnected) dock.remove();
    if (!share && !dock.isConnected) dockParent.insertBefore(dock, document.querySelector(".share-cta"));
  },
});
buttons();
