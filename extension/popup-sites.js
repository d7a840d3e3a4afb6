// The popup's trust settings: the supported chat sites (on by default, each
// can be turned off: `sitesOff`), the local origins turned on
// (`localOrigins`), and the tool policy of one site (`toolPolicy`, see
// policy.js). `popup.html?origin=ORIGIN` opens it on that site's policy.
// The side panel (panel.js) uses the policy part for its tab's site; a
// section whose elements a page lacks is skipped.
"use strict";

const PopupSites = (() => {
  const LOCAL = /^https?:\/\/(127\.0\.0\.1|localhost)(:\d{1,5})?$/;
  let store = { localOrigins: [], sitesOff: [], toolPolicy: {} };
  let chosen = new URLSearchParams(location.search).get("origin") || null;
  let lastTools = [];


  /** Every origin the popup can set a policy for. */
  function origins() {
    const out = ToolhubSites.list.map((a) => ({ origin: a.origins[0], name: a.name }));
    for (const o of store.localOrigins) out.push({ origin: o, name: o });
    return out;
  }

  function policyOf(tool, tools) {
    if (!chosen) return ToolhubPolicy.byDefinition(tool);
    return ToolhubPolicy.forTool(store.toolPolicy, chosen, tools, tool.qualifiedName).policy;
  }

  async function save(patch) {
    await chrome.storage.local.set(patch);
    Object.assign(store, patch);
  }

  function renderSites() {
    const ul = document.getElementById("sites");
    if (!ul) return;
    ul.replaceChildren();
    for (const a of ToolhubSites.list) {
      const o = a.origins[0];
      const box = el("input", { type: "checkbox", checked: !store.sitesOff.includes(o), "data-origin": o });
      box.onchange = () => {
        const off = store.sitesOff.filter((x) => !a.origins.includes(x));
        if (!box.checked) off.push(...a.origins);
        save({ sitesOff: off });
      };
      ul.append(el("li", { "data-origin": o }, el("label", {}, box, el("span", { class: "name" }, a.name)), el("span", { class: "muted" }, ` ${o.replace(/^https:\/\//, "")}`)));
    }
    for (const o of store.localOrigins) {
      const box = el("input", { type: "checkbox", checked: true, "data-origin": o, title: "untick to turn this local page off" });
      box.onchange = () => save({ localOrigins: store.localOrigins.filter((x) => x !== o) }).then(render);
      ul.append(el("li", { "data-origin": o, "data-local": "true" }, el("label", {}, box, el("span", { class: "name" }, o)), el("span", { class: "muted" }, " local page")));
    }
  }

  function renderSiteChoice() {
    const sel = document.getElementById("policy-site");
    const all = origins();
    if (chosen && !all.some((x) => x.origin === chosen)) all.push({ origin: chosen, name: chosen });
    if (!chosen || !all.some((x) => x.origin === chosen)) chosen = all.length ? all[0].origin : null;
    sel.replaceChildren(...all.map((x) => el("option", { value: x.origin, selected: x.origin === chosen }, x.name)));
    sel.onchange = () => {
      chosen = sel.value;
      renderPolicy(lastTools);
    };
  }

  /** One row per tool: its policy on the chosen site (a select), the
   * default it has by its definition noted. */
  function renderPolicy(tools) {
    lastTools = tools;
    const ul = document.getElementById("policy");
    if (!ul) return;
    ul.replaceChildren();
    if (!chosen) return;
    const q = (document.getElementById("policy-search").value || "").toLowerCase();
    for (const t of tools.slice().sort((a, b) => a.qualifiedName.localeCompare(b.qualifiedName))) {
      if (q && !t.qualifiedName.toLowerCase().includes(q) && !(t.description || "").toLowerCase().includes(q)) continue;
      const p = ToolhubPolicy.forTool(store.toolPolicy, chosen, tools, t.qualifiedName);
      const def = ToolhubPolicy.byDefinition(t);
      const sel = el("select", { "data-tool": t.qualifiedName, "aria-label": `policy of ${t.qualifiedName}` });
      // A meta-tool is judged by what it would run: it cannot be let run
      // without asking by itself.
      // ("auto" stored for one means that, whatever an older version stored).
      const meta = ToolhubPolicy.isMeta(t);
      const shown = meta && !(p.set && p.policy !== "auto") ? "auto" : p.policy;
      for (const v of ToolhubPolicy.POLICIES) {
        const isDef = meta ? v === "auto" : v === def;
        const label = { auto: meta ? "by what it runs" : "run without asking", ask: "ask", never: "never" }[v] + (isDef ? " (default)" : "");
        sel.append(el("option", { value: v, selected: v === shown }, label));
      }
      sel.onchange = () => save({ toolPolicy: ToolhubPolicy.withPolicy(store.toolPolicy, chosen, [t.qualifiedName], sel.value) });
      ul.append(el("li", { "data-tool": t.qualifiedName, "data-policy": shown }, el("span", { class: "name" }, t.qualifiedName), sel));
    }
  }

  function render() {
    renderSites();
    renderSiteChoice();
    renderPolicy(lastTools);
  }

  async function addOrigin(ev) {
    ev.preventDefault();
    const input = document.getElementById("local-origin");
    const err = document.getElementById("local-error");
    let o = input.value.trim().replace(/\/+$/, "");
    try {
      o = new URL(o).origin;
    } catch {
      o = "";
    }
    if (!LOCAL.test(o)) {
      err.textContent = "A local page is http://127.0.0.1:PORT or http://localhost:PORT (other sites are the supported chat sites above).";
      return;
    }
    err.textContent = "";
    if (!store.localOrigins.includes(o)) await save({ localOrigins: [...store.localOrigins, o] });
    input.value = "";
    render();
  }

  async function load() {
    const s = await chrome.storage.local.get(["localOrigins", "sitesOff", "toolPolicy"]);
    store = { localOrigins: s.localOrigins || [], sitesOff: s.sitesOff || [], toolPolicy: s.toolPolicy || {} };
    if (!chosen) {
      // The site of the tab the popup was opened over, when it is one.
      const [tab] = await chrome.tabs.query({ active: true, currentWindow: true }).catch(() => []);
      try {
        const o = tab && tab.url ? new URL(tab.url).origin : null;
        if (o && origins().some((x) => x.origin === o)) chosen = o;
      } catch {}
    }
    render();
  }

  chrome.storage.onChanged.addListener((ch, area) => {
    if (area !== "local" || !["localOrigins", "sitesOff", "toolPolicy"].some((k) => k in ch)) return;
    load();
  });
  const form = document.getElementById("local-form");
  if (form) form.onsubmit = addOrigin;
  document.getElementById("policy-search").oninput = () => renderPolicy(lastTools);
  load();

  /** Show the policy of `origin` (the side panel's tab). */
  function choose(origin) {
    if (origin === chosen) return;
    chosen = origin;
    render();
  }

  return { policyOf, renderPolicy, choose, origin: () => chosen };
})();
