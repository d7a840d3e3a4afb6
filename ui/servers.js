// Servers: state, transport, pid, uptime, restarts, tools, last error,
// stderr tail, the health checks with their fix, reload and pin approval;
// a per-context server's instances (one per client context), each of
// which can be stopped.
// Live from server_status and instance_status; the full report (checks,
// stderr) is asked for again whenever a server or an instance changes state.

import { badge, fill, h, ms } from "./dom.js";

/** How often the view reads health again while per-context servers run,
 * to keep their instances' uptime and idle time current (their starts,
 * state changes and stops arrive as instance_status events). */
const INSTANCE_REFRESH_MS = 5000;

export function mount(root, { hub, store, setHealth }) {
  const status = h("p", { class: "muted", role: "status" });
  // What the last Reload / Approve did; the status line is the hub's health.
  const note = h("p", { class: "muted", role: "status", id: "server-note" });
  const list = h("div", { class: "cards", id: "server-list" });
  const checks = h("ul", { class: "checks", id: "checks" });
  const pins = h("div", { id: "pins" });
  const views = h("div", { id: "views" });
  let pending = null;
  let events = 0; // server_status events seen; a report older than the last one is asked for again

  async function refresh() {
    const seen = events;
    try {
      setHealth(await hub.request({ type: "health_check" }));
    } catch (e) {
      status.textContent = `Cannot read the hub's health: ${e.message}`;
      return;
    }
    if (events !== seen) refreshSoon();
  }

  // Several server_status events in a burst cost one health_check.
  function refreshSoon() {
    if (pending) return;
    pending = setTimeout(() => {
      pending = null;
      refresh();
    }, 150);
  }

  function onStatus() {
    events += 1;
    refreshSoon();
  }

  async function reload(approve) {
    note.textContent = approve ? "Approving the changed tool definitions…" : "Reloading tools…";
    try {
      const r = await hub.request({ type: "reload_tools", approve });
      note.textContent = `Tools reloaded: ${(r.tools || []).length} tools.`;
      refresh();
    } catch (e) {
      note.textContent = `Reload failed: ${e.message}`;
    }
  }

  async function stopInstance(server, context) {
    note.textContent = `Stopping ${server}'s instance for ${context}…`;
    try {
      await hub.request({ type: "stop_instance", server, context });
      note.textContent = `Stopped ${server}'s instance for ${context}.`;
    } catch (e) {
      note.textContent = `Stopping the instance failed: ${e.message}`;
    }
    refresh();
  }

  function render() {
    const health = store.health;
    const servers = [...store.servers.values()].sort((a, b) => a.name.localeCompare(b.name));
    fill(list, servers.length
      ? servers.map((s) => card(s, stopInstance))
      : h("p", { class: "muted" }, "No MCP server is configured."));
    fill(checks, (health?.checks || []).map((c) =>
      h("li", { class: c.ok ? "ok" : "fail" },
        h("span", { class: "check-mark", "aria-hidden": "true" }, c.ok ? "✓" : "✗"),
        h("strong", {}, c.name), " ", c.ok ? "" : h("span", { class: "sr-only" }, "failed: "), c.message,
        c.fix ? h("p", { class: "fix" }, "Fix: ", h("code", {}, c.fix)) : null)));
    const changed = health?.changedTools || [];
    fill(pins, changed.length
      ? h("div", { class: "warn" },
        h("p", {}, `${changed.length} tool definition(s) changed since they were approved: `, changed.join(", ")),
        h("button", { type: "button", onclick: () => reload(true) }, "Approve changed tools"))
      : null);
    fill(views, viewTable(health));
    if (health) {
      status.textContent = `Hub ${health.status} · up ${ms(health.uptimeMs)} · ${health.toolCount} tools · ${health.connections} connection(s)`;
    }
  }

  root.append(
    h("div", { class: "bar" },
      h("h2", {}, "Servers"),
      h("button", { type: "button", onclick: () => reload(false) }, "Reload tools"),
      h("button", { type: "button", onclick: refresh }, "Refresh")),
    status, note, pins, list,
    h("h3", {}, "Views and clients"), views,
    h("h3", {}, "Health checks"), checks);
  render();
  refresh();
  const ticker = setInterval(() => {
    if ([...store.servers.values()].some((s) => s.scope === "context")) refresh();
  }, INSTANCE_REFRESH_MS);
  const offs = [store.sub("servers", render), hub.on("server_status", onStatus),
    hub.on("instance_status", onStatus),
    // A re-listed tool may have changed its definition (changedTools).
    hub.on("tools_updated", onStatus)];
  return () => {
    clearTimeout(pending);
    clearInterval(ticker);
    offs.forEach((f) => f());
  };
}

function card(s, stopInstance) {
  const tail = s.stderrTail || [];
  const wide = s.scope === "context" && (s.instances || []).length > 0;
  return h("article", { class: wide ? "card wide" : "card", dataset: { server: s.name, state: s.state } },
    h("header", {}, h("h3", {}, s.name), badge(s.state)),
    h("dl", { class: "facts" },
      fact("Transport", s.transport || "–"),
      fact("PID", s.pid ?? "–"),
      fact("Uptime", ms(s.uptimeMs)),
      fact("Restarts", s.restarts ?? 0),
      fact("Tools", s.toolCount ?? 0)),
    s.lastError ? h("p", { class: "last-error" }, h("strong", {}, "Last error: "), s.lastError) : null,
    s.scope === "context" ? instances(s, stopInstance) : null,
    tail.length
      ? h("details", { class: "pre" }, h("summary", {}, `stderr (last ${tail.length} lines)`), h("pre", {}, tail.join("\n")))
      : null);
}

/** A per-context server's instances: context, pid, state, uptime, calls,
 * idle time, and a button that stops one (its whole process group). */
function instances(s, stopInstance) {
  const list = s.instances || [];
  const title = `Instances: ${list.length} of at most ${s.maxInstances}, each stopped after ${ms(s.instanceIdleMs)} unused`;
  if (!list.length) return h("p", { class: "muted instances" }, `${title}. None is running.`);
  return h("div", { class: "instances scroll" },
    h("p", {}, title),
    h("table", { class: "grid", dataset: { instancesOf: s.name } },
      h("thead", {}, h("tr", {}, ["Context", "PID", "State", "Uptime", "Calls", "Idle", ""].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, list.map((i) => h("tr", { dataset: { context: i.context } },
        h("td", {}, h("code", {}, i.context)),
        h("td", {}, String(i.pid ?? "–")),
        h("td", {}, badge(i.state)),
        h("td", {}, ms(i.uptimeMs)),
        h("td", {}, String(i.calls) + (i.active ? ` (${i.active} running)` : "")),
        h("td", {}, ms(i.idleMs)),
        h("td", {}, h("button", {
          type: "button",
          "aria-label": `Stop ${s.name}'s instance for ${i.context}`,
          onclick: () => stopInstance(s.name, i.context),
        }, "Stop")))))));
}

/** The aggregate and each view: tools, how they are listed, and which
 * clients are connected to it now (health's `views` and `connected`). */
function viewTable(health) {
  if (!health) return null;
  const connected = health.connected || {};
  const who = (c) => c && c.sessions
    ? `${c.sessions} session(s): ${(c.clients || []).join(", ")}`
    : "nobody";
  const rows = [
    h("tr", { dataset: { view: "" } },
      h("td", {}, h("em", {}, "the aggregate (/ws, /mcp)")),
      h("td", {}, String(health.toolCount ?? 0)),
      h("td", {}, "every tool"),
      h("td", {}, who(connected[""]))),
    ...(health.views || []).map((v) => h("tr", { dataset: { view: v.name } },
      h("td", {}, h("code", {}, v.name)),
      h("td", {}, String(v.toolCount)),
      h("td", {}, v.discovery ? `discovery (${v.listed} meta-tools)` : `${v.listed} listed`),
      h("td", {}, who(v.connected)))),
  ];
  const clients = health.clients || [];
  return [
    h("table", { class: "grid", id: "view-table" },
      h("thead", {}, h("tr", {}, ["View", "Tools", "Listed as", "Connected"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, rows)),
    clients.length
      ? h("p", { class: "muted", id: "client-list" }, "Clients: ",
        clients.map((c) => `${c.name} (views ${c.views.join(", ")}; ${c.sessions} connected)`).join(" · "))
      : h("p", { class: "muted", id: "client-list" }, "No client tokens are configured: every client uses the hub's token."),
  ];
}

function fact(k, v) {
  return [h("dt", {}, k), h("dd", {}, String(v))];
}
