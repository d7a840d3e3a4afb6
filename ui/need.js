// One need_user confirmation with Approve / Deny, shared by the Tasks view
// (every pending one) and the Tools view (the one its own call raised).

import { errorBox, h, pre } from "./dom.js";

/** A card for `n`; `said(textOrNode)` is told how the answer went. */
export function needCard(hub, store, n, said) {
  const answer = async (approve) => {
    try {
      await hub.request({ type: "confirm", taskId: n.taskId, approve, stepIndex: n.stepIndex, paramsHash: n.paramsHash });
      said(approve ? "Approved." : "Declined.");
    } catch (e) {
      // Expired or already answered elsewhere: it is no longer pending.
      said(errorBox(e.hubError || { message: e.message }));
    }
    store.needUser.delete(n.taskId);
    store.notify("need");
  };
  return h("article", { class: "need", dataset: { task: n.taskId } },
    h("h3", {}, "Approval needed: ", h("code", {}, n.tool)),
    h("p", {}, n.reason),
    pre("Params", n.params, true),
    n.expiresAt ? h("p", { class: "muted" }, `Answer before ${new Date(n.expiresAt).toLocaleTimeString()}`) : null,
    h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", onclick: () => answer(true) }, "Approve"),
      h("button", { type: "button", class: "danger", onclick: () => answer(false) }, "Deny")));
}
