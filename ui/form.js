// A form generated from a tool's JSON Schema: a field per property
// (text, number, checkbox, a list for `enum`, JSON for objects and
// arrays), labelled with its name and description, required ones marked.

import { h } from "./dom.js";

let serial = 0;

/** Returns {el, read}; read() gives the params or throws an Error naming the field. */
export function schemaForm(schema) {
  const props = (schema && schema.properties) || {};
  const required = new Set((schema && schema.required) || []);
  const fields = [];
  const el = h("div", { class: "fields" });
  for (const [name, prop] of Object.entries(props)) {
    const f = field(name, prop || {}, required.has(name));
    fields.push(f);
    el.append(f.el);
  }
  const open = schema && schema.additionalProperties !== false;
  let extra = null;
  if (!fields.length || (open && !schema.properties)) {
    extra = field("params", { type: "object", description: "the tool's arguments as a JSON object" }, false, true);
    el.append(extra.el);
  }
  function read() {
    const params = {};
    for (const f of fields) {
      const v = f.read();
      if (v !== undefined) params[f.name] = v;
    }
    if (extra) Object.assign(params, extra.read() || {});
    return params;
  }
  return { el, read };
}

function field(name, prop, required, whole = false) {
  const id = `f-${++serial}`;
  const type = Array.isArray(prop.type) ? prop.type.find((t) => t !== "null") : prop.type;
  const help = prop.description ? h("small", { id: `${id}-help` }, prop.description) : null;
  const label = h("label", { for: id }, name, required ? h("span", { class: "req", title: "required" }, " *") : null);
  const common = { id, name, "aria-describedby": help ? `${id}-help` : null, required };
  let input;
  let read;
  if (Array.isArray(prop.enum)) {
    input = h("select", common,
      required ? null : h("option", { value: "" }, "(none)"),
      prop.enum.map((v, i) => h("option", { value: String(i) }, JSON.stringify(v))));
    read = () => (input.value === "" ? undefined : prop.enum[Number(input.value)]);
  } else if (type === "boolean") {
    input = h("input", { ...common, type: "checkbox", required: false });
    if (prop.default === true) input.checked = true;
    read = () => input.checked;
  } else if (type === "number" || type === "integer") {
    input = h("input", { ...common, type: "number", step: type === "integer" ? "1" : "any",
      value: prop.default ?? null });
    read = () => {
      if (input.value === "") return missing(name, required);
      const n = Number(input.value);
      if (Number.isNaN(n)) throw new Error(`${name}: "${input.value}" is not a number`);
      return n;
    };
  } else if (type === "string") {
    const long = /^(content|text|body|script|command|code|source|html)$/i.test(name);
    input = long
      ? h("textarea", { ...common, rows: 3 })
      : h("input", { ...common, type: "text", autocomplete: "off", spellcheck: "false" });
    if (typeof prop.default === "string") input.value = prop.default;
    read = () => (input.value === "" && !required ? undefined : input.value);
  } else {
    input = h("textarea", { ...common, rows: 3, class: "json", placeholder: type === "array" ? "[ … ]" : whole ? "{ … }" : "JSON" });
    read = () => {
      if (input.value.trim() === "") return missing(name, required);
      try {
        return JSON.parse(input.value);
      } catch (e) {
        throw new Error(`${name}: not valid JSON (${e.message})`);
      }
    };
  }
  return { name, el: h("div", { class: "field" }, label, input, help), read };
}

function missing(name, required) {
  if (required) throw new Error(`${name} is required`);
  return undefined;
}
