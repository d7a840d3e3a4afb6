// Building DOM without innerHTML: every text a tool or server produced is
// set as text, never parsed as markup.

/** h("button", {class: "x", onclick: f}, "label", child…) */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.className = v;
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (v === true) {
      el.setAttribute(k, "");
    } else {
      el.setAttribute(k, String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A value as readable text: strings as they are, the rest as JSON. */
export function show(v) {
  if (v === undefined) return "";
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

/** One line, cut to `n` characters. */
export function brief(v, n = 120) {
  const s = typeof v === "string" ? v : JSON.stringify(v) ?? "";
  return s.length > n ? s.slice(0, n - 1) + "…" : s;
}

export function ms(v) {
  if (v === null || v === undefined) return "–";
  if (v < 1000) return `${v} ms`;
  const s = Math.round(v / 1000);
  if (s < 120) return `${s} s`;
  const m = Math.round(s / 60);
  return m < 120 ? `${m} min` : `${Math.round(m / 60)} h`;
}

/** An error object as the hub sends it: class, message, suggestion. */
export function errorBox(err) {
  if (!err) return null;
  return h("div", { class: "error", role: "alert" },
    h("strong", {}, err.errorType || "ERROR"), " ",
    h("span", { class: "msg" }, err.message || ""),
    err.suggestion ? h("p", { class: "suggestion" }, "Suggestion: ", err.suggestion) : null);
}

export function badge(state) {
  return h("span", { class: `state state-${state}` }, state);
}

/** A labelled block of preformatted JSON, closed by default when long. */
export function pre(label, v, open = false) {
  const text = show(v);
  return h("details", { class: "pre", open: open || text.length < 200 },
    h("summary", {}, label), h("pre", {}, text));
}
