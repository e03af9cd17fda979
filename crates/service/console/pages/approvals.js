// pages/approvals.js: the tenant's calls waiting for a person, updated as the tenant's event stream reports changes: tool, arguments, capability classes, caller and session; allow once, allow for the session, or deny with a reason.

import { api, watchTenant } from "../api.js";
import { h, notice, prettyJson, replace, when } from "../dom.js";

export async function show(main, _rest, signal) {
  const list = h("div", { id: "approvals", "aria-live": "polite" });
  const status = h("div", { id: "approvals-status" });
  replace(main,
    h("h1", {}, "Approvals"),
    h("p", { class: "muted" }, "Calls waiting for a person. The queue updates by itself; a decision lets the run go on."),
    status, list);
  const cards = new Map();
  const refresh = async () => {
    const { approvals } = await api("GET", "/approvals");
    const pending = new Set(approvals.map((approval) => approval.id));
    for (const [id, card] of cards) {
      if (!pending.has(id)) {
        card.remove();
        cards.delete(id);
      }
    }
    for (const approval of approvals) {
      if (!cards.has(approval.id)) {
        const card = approvalCard(approval, status, () => {
          card.remove();
          cards.delete(approval.id);
          if (cards.size === 0) list.append(empty);
        });
        cards.set(approval.id, card);
        list.append(card);
      }
    }
    if (cards.size === 0) {
      if (!list.contains(empty)) replace(list, empty);
    } else {
      empty.remove();
    }
  };
  const empty = h("p", { class: "muted", id: "no-approvals" }, "Nothing is waiting.");
  await refresh();
  // The queue changes when the tenant's stream says so (or it reconnects, or is down).
  const affects = new Set(["ready", "approval_needed", "approval_decided", "session_deleted", "stream_down"]);
  watchTenant((event) => {
    if (affects.has(event.type)) refresh().catch((error) => replace(status, notice("error", error.message)));
  }, signal);
}

function approvalCard(approval, status, decided) {
  const reason = h("input", { type: "text", name: "reason", placeholder: "Why (shown to the model)", "aria-label": `reason to deny ${approval.tool}` });
  const decide = (decision) => async () => {
    try {
      const body = { decision };
      if (decision === "deny" && reason.value.trim()) body.reason = reason.value.trim();
      await api("POST", `/approvals/${encodeURIComponent(approval.id)}`, body);
      replace(status, notice("ok", `${approval.tool}: ${decision.replaceAll("_", " ")}`));
      decided();
    } catch (error) {
      replace(status, notice("error", error.message));
    }
  };
  return h("article", { class: "card approval", dataset: { approval: approval.id }, "aria-label": `approval of ${approval.tool}` },
    h("header", {},
      h("code", { class: "tool" }, approval.tool), " ",
      approval.classes.map((cls) => h("span", { class: `badge class-${cls}` }, cls))),
    h("p", { class: "muted" },
      "Asked by ", h("strong", {}, approval.caller || "(unknown)"),
      " in session ", h("a", { href: `#/sessions/${encodeURIComponent(approval.session)}` }, approval.session),
      " · ", when(approval.created_at)),
    h("p", {}, approval.reason),
    h("h3", {}, "Arguments"),
    prettyJson(approval.arguments),
    h("div", { class: "actions" },
      h("button", { type: "button", class: "allow", onclick: decide("allow_once") }, "Allow once"),
      h("button", { type: "button", class: "allow", onclick: decide("allow_for_session") }, "Allow for the session"),
      reason,
      h("button", { type: "button", class: "deny", onclick: decide("deny") }, "Deny")));
}
