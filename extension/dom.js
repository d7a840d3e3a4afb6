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

/**
 * The form a server asks a person to fill in (a `need_user` with `input`:
 * `elicitation/create` and its `requestedSchema`), as inputs: a checkbox
 * for a boolean, a number box, a list for an `enum`, a text box otherwise.
 * `{node, read}`; `read()` gives the content to answer with. `null` for a
 * plain approval (no form).
 */
function formOf(input) {
  const params = (input && input.params) || {};
  const schema = params.requestedSchema;
  if (!schema || typeof schema.properties !== "object") return null;
  const required = new Set(schema.required || []);
  const fields = [];
  const node = el("div", { class: "form" }, el("div", { class: "message" }, String(params.message || "")));
  for (const [key, p] of Object.entries(schema.properties)) {
    let box;
    if (p.type === "boolean") box = el("input", { type: "checkbox", checked: p.default === true });
    else if (Array.isArray(p.enum)) box = el("select", {}, ...p.enum.map((v) => el("option", { value: String(v), selected: v === p.default }, String(v))));
    else box = el("input", { type: p.type === "number" || p.type === "integer" ? "number" : "text", value: p.default !== undefined ? String(p.default) : "" });
    box.setAttribute("data-field", key);
    const label = String(p.title || key) + (required.has(key) ? " *" : "");
    node.append(el("label", { class: "field" }, el("span", {}, label), box));
    fields.push([key, p, box]);
  }
  const read = () => {
    const content = {};
    for (const [key, p, box] of fields) {
      if (p.type === "boolean") content[key] = box.checked;
      else if (box.value === "" && !required.has(key)) continue;
      else if (p.type === "number" || p.type === "integer") content[key] = Number(box.value);
      else content[key] = box.value;
    }
    return content;
  };
  return { node, read };
}
