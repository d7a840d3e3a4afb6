// The extension pages' one DOM helper (popup, panel): an element with its
// attributes (`class`, `data-*`, `type`, `title`, `aria-label` as
// attributes, anything else as a property) and children.
"use strict";

function el(tag, attrs = {}, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") n.className = v;
    else if (k.startsWith("data-") || k === "type" || k === "title" || k === "aria-label") n.setAttribute(k, v);
    else n[k] = v;
  }
  for (const c of children) n.append(c);
  return n;
}
